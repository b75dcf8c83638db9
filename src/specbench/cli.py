"""The `specbench` command line: parse, call, render. No logic lives here.

Each command group lives in `specbench.commands.<module>` and exposes `register(app)`. `COMMANDS` below is the
static table of commands; a command's module is imported only when that command runs (or when `specbench --help`
needs its help text), so `specbench plan` does not pay for the report's matplotlib or the runner's HTTP clients.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

import typer
from typer.core import TyperGroup

from specbench.errors import UserError

try:  # typer 0.29 carries its own click (typer/_click); earlier releases use click itself
    from typer._click.exceptions import UsageError as _UsageError
except ImportError:  # pragma: no cover - another typer release
    from click.exceptions import UsageError as _UsageError  # type: ignore[no-redef, assignment]

if TYPE_CHECKING:  # typer vendors click as typer._click; the separate click package is not needed at run time
    from typer._click import Command

# Command name -> module that registers it, in the order they appear in --help.
COMMANDS: dict[str, str] = {
    "plan": "specbench.commands.plan",
    "doctor": "specbench.commands.doctor",
    "run": "specbench.commands.run",
    "report": "specbench.commands.report",
    "export": "specbench.commands.report",
    "compare": "specbench.commands.compare",
    "models": "specbench.commands.models",
    "predict": "specbench.commands.predict",
    "calibrate": "specbench.commands.calibrate",
}


class _LazyCommands(MutableMapping[str, "Command"]):
    """The group's `commands`: the names of `COMMANDS`; a module is imported on the first look-up of one of them."""

    def __init__(self, table: dict[str, str]) -> None:
        self._table = table
        self._loaded: dict[str, Command] = {}

    def _load(self, module: str) -> None:
        sub = typer.Typer()
        importlib.import_module(module).register(sub)
        for name, cmd in typer.main.get_group(sub).commands.items():
            self._loaded.setdefault(name, cmd)

    def __getitem__(self, name: str) -> Command:
        if name not in self._loaded and name in self._table:
            self._load(self._table[name])
        return self._loaded[name]

    def __setitem__(self, name: str, cmd: Command) -> None:
        self._loaded[name] = cmd

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        yield from self._table
        yield from (n for n in self._loaded if n not in self._table)

    def __len__(self) -> int:
        return len(set(self._table) | set(self._loaded))

    def __contains__(self, name: object) -> bool:
        return name in self._table or name in self._loaded


class LazyGroup(TyperGroup):
    """A typer group whose subcommands come from `COMMANDS`, each built when first asked for."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        lazy = _LazyCommands(COMMANDS)
        for name, cmd in self.commands.items():  # any registered directly on `app`
            lazy[name] = cmd
        self.commands = lazy

    # A usage mistake (an unknown command or option, a missing argument, a value of the wrong kind) is one line,
    # `specbench: error: ...` with exit status 2 as every other user mistake, not typer's boxed panel after a usage
    # block: click raises these from the group's and the subcommand's parsing (click/core.py::Group.invoke builds
    # the subcommand's context inside it), so both are turned into the project's UserError here.
    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except _UsageError as exc:
            raise _one_line(exc) from None

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except _UsageError as exc:
            raise _one_line(exc) from None


def _one_line(exc: _UsageError) -> UserError:
    """`specbench run: No such option: --bogus (Possible options: --gpus); see 'specbench run --help'`."""
    path = exc.ctx.command_path if exc.ctx is not None else "specbench"
    said = " ".join(exc.format_message().split()).rstrip(".")
    return UserError(f"{'' if path == 'specbench' else path + ': '}{said}; see '{path} --help'")


_PLAIN = (str, int, float, bool, list[str])  # the annotations _install_plain_coercion serves


def _install_plain_coercion() -> None:
    """Coerce the value of an option annotated plain `str` / `int` / `float` / `bool` / `list[str]` (no parser,
    min/max or file) without pydantic: typer 0.29 builds a pydantic TypeAdapter for every option it processes
    (typer/core.py::_TyperParameter.get_runtime_param@0.29.2 -> typer/_coercion.py::build_runtime_param), and
    importing pydantic and building them was a third of what `specbench plan` executed.

    The plain path converts as the adapter does for the common value (a str that `float()`/`int()` reads; NaN and
    inf pass through: the commands check them) and hands anything else to typer's own runtime param, so an error
    is typer's own message. Without these private names (another typer release) typer's path is kept as is."""
    try:
        from typer import _coercion, core

        param_cls, base, build = core._TyperParameter, _coercion.RuntimeParam, _coercion.build_runtime_param
        original = param_cls.get_runtime_param
    except (ImportError, AttributeError):
        return

    class _PlainRuntimeParam(base):  # type: ignore[misc, valid-type]  # a frozen dataclass: inherits its __init__
        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            kind = self.annotation
            if type(value) is str and kind is str:
                return value
            if kind == list[str] and isinstance(value, (list, tuple)) and all(type(x) is str for x in value):
                return list(value)
            if isinstance(value, str) and value.isascii():
                if kind is float:
                    try:
                        return float(value)
                    except ValueError:
                        pass  # typer's own error below
                elif kind is int and value.removeprefix("-").isdigit():
                    return int(value)
            elif kind is bool and isinstance(value, bool):
                return value
            return build(param.type_descriptor)._coerce_value(value, param=param, ctx=ctx)

    def get_runtime_param(self: Any) -> Any:
        desc = getattr(self, "type_descriptor", None)
        info = getattr(desc, "parameter_info", None)
        if (getattr(self, "_runtime_param", 0) is None and getattr(desc, "annotation", None) in _PLAIN
                and getattr(desc, "file_annotation", 0) is None and getattr(info, "parser", 0) is None
                and getattr(info, "min", 0) is None and getattr(info, "max", 0) is None):
            self._runtime_param = _PlainRuntimeParam(parameter_info=info, annotation=desc.annotation)  # type: ignore[union-attr]
        return original(self)  # typer's: returns the runtime param cached above, or builds its own

    param_cls.get_runtime_param = get_runtime_param  # type: ignore[method-assign]


_install_plain_coercion()

app = typer.Typer(
    name="specbench",
    cls=LazyGroup,
    help="Plan, diagnose, run and report speculative-decoding deployments on SGLang and vLLM.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    # Without a registered command typer needs a callback to build a group; this one does nothing.
    pass


def main(argv: list[str] | None = None) -> None:
    """Entry point: user mistakes become one line on stderr and exit status 2."""
    from specbench import redact

    # every line any command prints goes through the one redaction rule set (redact.py), the secrets of its own
    # command line (`plan -- ... --api-key X`) learnt first
    redact.learn(sys.argv if argv is None else argv)
    sys.stdout, sys.stderr = redact.RedactingStream(sys.stdout), redact.RedactingStream(sys.stderr)
    try:
        app(args=argv, prog_name="specbench")
    except UserError as exc:
        print(f"specbench: error: {exc}", file=sys.stderr)
        if _wants_json(sys.argv[1:] if argv is None else argv):  # a JSON reader gets its answer on stdout too
            import json

            print(json.dumps({"status": "error", "error": str(exc)}))
        sys.exit(2)
    except KeyboardInterrupt:
        print("specbench: interrupted", file=sys.stderr)
        sys.exit(130)
    except SystemExit as exc:
        if _ctrl_c_in_typer(exc):  # typer (0.29.2) turns a Ctrl-C in a command into a silent Exit(130)
            print("specbench: interrupted", file=sys.stderr)
        raise
    finally:
        _forget_caught_keyboard_interrupt()


def _wants_json(argv: list[str]) -> bool:
    """`--json` among specbench's own options (before a `--` that starts a launch command)."""
    own = argv[:argv.index("--")] if "--" in argv else argv
    return "--json" in own


def _ctrl_c_in_typer(exc: SystemExit) -> bool:
    """The exit is typer's answer to a KeyboardInterrupt (typer/core.py::_main: `raise Exit(130) from e`), not a
    command's own Exit(130) after it said what it kept (`run`)."""
    return exc.code == 130 and isinstance(getattr(exc.__context__, "__cause__", None), KeyboardInterrupt)


def _forget_caught_keyboard_interrupt() -> None:
    """Keep the exit status this process chose after a Ctrl-C / SIGHUP / SIGTERM it handled (130, or 0).

    CPython (seen on 3.11.7; Python/pythonrun.c::run_eval_code_obj, 3.12 alike) marks a KeyboardInterrupt that leaves a
    *string* exec/eval as unhandled even when a caller catches it, and under `python -m specbench` Py_RunMain then
    ends the process with SIGINT (status -2, no traceback) instead of our sys.exit. The string execs are
    dataclasses' generated methods, run while a module is imported lazily mid-run (an engine's launch module, say):
    a signal that lands in one left `run` killed by SIGINT after it had printed "interrupted". Each string exec
    clears the mark when it starts, so a trivial one here forgets a caught interrupt; one that really escapes
    main() is marked again by the interpreter (runpy's caller), so the conventional status is kept for it."""
    exec("pass", {})  # noqa: S102 - a constant; see the docstring


if __name__ == "__main__":
    main()
