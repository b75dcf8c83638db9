"""Is the running server the model the matrix names? Checked at boot, before the first cell (`model_mismatch`: the
names /v1/models serves against the matrix's or the launch command's), and after every cell (`model_changed`: the
served names against those at boot), so a server of another model is never measured."""

from __future__ import annotations

from specbench.matrix.schema import MatrixSpec


def expected_model(spec: MatrixSpec, argv: list[str]) -> str | None:
    """The model the matrix asks for: `served_model_name`, else the launch's `--served-model-name`, else its model
    (`--model-path X`, `--model X`, `serve X`); None when neither says."""
    from specbench.matrix.adapters import command_model

    if spec.served_model_name:
        return spec.served_model_name
    for i, word in enumerate(argv):
        head, sep, tail = word.partition("=")
        if head == "--served-model-name":
            return tail if sep else (argv[i + 1] if i + 1 < len(argv) else None)
    return command_model(argv)


def model_mismatch(spec: MatrixSpec, argv: list[str], served: list[str] | None) -> str | None:
    """Why the running server is not the model the matrix names (both names), or None (it is, or nothing says)."""
    want = expected_model(spec, argv)
    if want is None or not served:
        return None
    if want.rstrip("/") in {s.rstrip("/") for s in served}:
        return None
    return (f"serves model {', '.join(repr(s) for s in served)} (/v1/models), but the matrix / launch command names "
            f"{want!r}; nothing was measured")


def model_changed(at_boot: tuple[str, ...] | None, now: list[str] | None) -> str | None:
    """The server's model changed since the boot's /v1/models check (a restart with another model, a reload): the
    cell's answers may be another model's. Every route, /generate included (its answers name no model: load/honesty.py
    checks the OpenAI routes' per request). None when either list is unknown or they agree."""
    if not at_boot or now is None or set(now) == set(at_boot):
        return None
    return (f"the server's /v1/models changed during the cell: {', '.join(repr(m) for m in at_boot)} at boot, "
            f"{', '.join(repr(m) for m in now) or 'nothing'} now (another model answered)")
