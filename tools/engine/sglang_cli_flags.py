"""Write the list of every command-line flag an SGLang release accepts, read from its own server_args.py.

    pip download --no-deps sglang==0.5.15.post1 -d /tmp/w && unzip -o /tmp/w/sglang-*.whl 'sglang/srt/*' -d /tmp/w
    python tools/engine/sglang_cli_flags.py /tmp/w/sglang/srt/server_args.py 0.5.15 \
        > src/specbench/engines/sglang/cli_flags/0.5.15.txt

Two styles are read, with the standard library's ast (nothing of SGLang is imported):
- <= 0.5.13: `parser.add_argument("--flag", "--alias", action="store_true" | nargs=... | type=...)` in
  `ServerArgs.add_cli_args`;
- 0.5.14+: fields `name: A[type, Arg(aliases=[...], cli_name=..., no_cli=..., nargs=...)]` of the `ServerArgs`
  dataclass, turned into flags by `sglang/srt/arg_groups/arg_utils.py::add_cli_args_from_dataclass` (`--` + the
  field name with `-` for `_`; `bool` -> store_true; `List[...]` -> nargs "+"), plus the explicit add_argument calls;
- 0.5.18+: the same fields live in the namespace structs of `sglang/srt/arg_groups/fields/*.py` (classes with a
  `_NS_PATH`); pass those files after server_args.py:

    python tools/engine/sglang_cli_flags.py /tmp/w/sglang/srt/server_args.py /tmp/w/sglang/srt/arg_groups/fields/*.py \
        0.5.23 > src/specbench/engines/sglang/cli_flags/0.5.23.txt
Each output line: `flag kind` with kind `switch` (takes no value), `value` (one word) or `list` (one or more words).
"""

from __future__ import annotations

import ast
import sys


def _kw(call: ast.Call, name: str) -> ast.expr | None:
    return next((k.value for k in call.keywords if k.arg == name), None)


def _const(node: ast.expr | None) -> object:
    return node.value if isinstance(node, ast.Constant) else None


def _kind_of_call(call: ast.Call) -> str:
    action = _const(_kw(call, "action"))
    if action in ("store_true", "store_false") or isinstance(_kw(call, "action"), ast.Attribute):
        return "switch" if action in ("store_true", "store_false") else "value"
    return "list" if _const(_kw(call, "nargs")) in ("+", "*") else "value"


def add_argument_flags(tree: ast.AST) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "add_argument":
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("-")]
            for n in names:
                out[str(n)] = _kind_of_call(node)
    return out


def _annotated_parts(ann: ast.expr) -> tuple[ast.expr, ast.Call | None] | None:
    """`A[T, Arg(...)]` / `A[T, "help"]` / `Annotated[...]` -> (T, the Arg call or None)."""
    if not (isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name) and ann.value.id in ("A", "Annotated")):
        return None
    elts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
    arg = next((e for e in elts[1:] if isinstance(e, ast.Call) and getattr(e.func, "id", "") == "Arg"), None)
    return elts[0], arg


def _type_kind(t: ast.expr) -> str:
    text = ast.unparse(t).replace(" ", "")
    inner = text[len("Optional["):-1] if text.startswith("Optional[") else text
    if inner == "bool":
        return "switch"
    return "list" if inner.startswith(("List[", "list[")) else "value"


def dataclass_flags(tree: ast.AST) -> dict[str, str]:
    out: dict[str, str] = {}
    def is_args(n: ast.AST) -> bool:
        return isinstance(n, ast.ClassDef) and (n.name == "ServerArgs" or any(
            isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_NS_PATH" for t in st.targets)
            for st in n.body))

    for cls in (n for n in ast.walk(tree) if is_args(n)):
        for st in cls.body:
            if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)):
                continue
            parts = _annotated_parts(st.annotation)
            if parts is None:
                continue
            typ, arg = parts
            if arg is not None and _const(_kw(arg, "no_cli")) is True:
                continue
            kind = _type_kind(typ)
            if arg is not None and _kw(arg, "action") is not None:
                kind = "value"
            if arg is not None and _const(_kw(arg, "nargs")) in ("+", "*"):
                kind = "list"
            cli = _const(_kw(arg, "cli_name")) if arg is not None else None
            names = [str(cli or "--" + st.target.id.replace("_", "-"))]
            aliases = _kw(arg, "aliases") if arg is not None else None
            if isinstance(aliases, ast.List):
                names += [str(_const(e)) for e in aliases.elts if _const(e)]
            for n in names:
                out[n] = kind
    return out


def main(paths: list[str], release: str) -> None:
    flags: dict[str, str] = {}
    for path in paths:
        tree = ast.parse(open(path, encoding="utf-8-sig").read())
        flags.update({**dataclass_flags(tree), **add_argument_flags(tree)})
    print(f"# every flag of sglang {release}: sglang/srt/server_args.py::ServerArgs.add_cli_args@{release}")
    for flag in sorted(flags):
        print(flag, flags[flag])


if __name__ == "__main__":
    main(sys.argv[1:-1], sys.argv[-1])
