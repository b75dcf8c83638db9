"""Write the list of every flag `vllm serve` accepts, from vLLM's own parser (run with the engine's python).

    .venv-vllm/bin/python tools/engine/vllm_cli_flags.py > src/specbench/engines/vllm/cli_flags/0.32.0.txt

The parser is the one `vllm serve` builds: vllm/entrypoints/cli/serve.py::ServeSubcommand.subparser_init ->
vllm/entrypoints/launchers/cli_args.py::make_arg_parser@0.32.0 (which adds EngineArgs.add_cli_args). Each output line:
`flag kind` with kind `switch` (no value), `value` (one word) or `list` (one or more words).
"""

from __future__ import annotations

import argparse

import vllm
from vllm.entrypoints.launchers.cli_args import make_arg_parser
from vllm.utils.argparse_utils import FlexibleArgumentParser


def kind(action: argparse.Action) -> str:
    if action.nargs == 0:
        return "switch"
    if action.nargs in ("+", "*") or (isinstance(action.nargs, int) and action.nargs > 1):
        return "list"
    if action.nargs == "?":
        return "optional"
    return "value"


def main() -> None:
    parser = make_arg_parser(FlexibleArgumentParser())
    print(f"# every flag of vllm serve {vllm.__version__}: vllm/entrypoints/launchers/cli_args.py::make_arg_parser")
    rows = {}
    for action in parser._actions:
        for opt in action.option_strings:
            rows[opt] = kind(action)
    for opt in sorted(rows):
        print(opt, rows[opt])


if __name__ == "__main__":
    main()
