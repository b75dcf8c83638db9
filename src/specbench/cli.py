"""The `specbench` command line: parse, call, render. No logic lives here.

Each command group lives in `specbench.commands.<name>` and exposes `register(app)`.
"""

from __future__ import annotations

import importlib
import sys

import typer

from specbench.errors import UserError

app = typer.Typer(
    name="specbench",
    help="Plan, diagnose, run and report speculative-decoding deployments on SGLang and vLLM.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

# Command modules, in the order they appear in --help.
COMMAND_MODULES = ("plan", "doctor", "run", "report", "models")

for _name in COMMAND_MODULES:
    try:
        _mod = importlib.import_module(f"specbench.commands.{_name}")
    except ModuleNotFoundError as exc:  # a command module not written yet
        if exc.name != f"specbench.commands.{_name}":
            raise
        continue
    _mod.register(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point: user mistakes become one line on stderr and exit status 2."""
    try:
        app(args=argv, prog_name="specbench")
    except UserError as exc:
        print(f"specbench: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("specbench: interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
