"""`make lint`: no public function that another package calls returns `dict[str, Any]` (issue 38), beyond an
allowlist that may only shrink (tools/ci/dict_returns_allow.txt).

A function "crosses a package boundary" when a module of another package of specbench imports it by name
(`from specbench.a.b import f`) or calls it as `b.f` after `from specbench.a import b` (or `import specbench.a.b as b`).
Not seen: a function re-exported through a package's `__init__`, a method called on an instance: the check can
under-report, never over-report.
Its return annotation is read from the source (ast): `dict[str, Any]`, `Dict[str, Any]`, and a list or tuple of them.
Fails when a function not on the allowlist returns one, and when an allowlisted one no longer does (or is gone):
the list then has to shrink with it.

Run: python tools/ci/dict_returns.py [--write]   (--write: rewrite the allowlist to what is found now)
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
ALLOW = Path(__file__).with_name("dict_returns_allow.txt")


def _module(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 else module


def _is_dict_any(node: ast.expr | None) -> bool:
    text = ast.unparse(node) if node is not None else ""
    text = text.replace(" ", "")
    return any(t in text for t in ("dict[str,Any]", "Dict[str,Any]"))


def _defs(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{node.name}.{item.name}", item


def _uses(tree: ast.Module, here: str) -> Iterator[tuple[str, str]]:
    """(module, name) that the module `here` reads from another module."""
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("specbench"):
            for a in node.names:
                yield node.module, a.name
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("specbench"):
                    aliases[a.asname or a.name] = a.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            yield aliases[node.value.id], node.attr


def found() -> list[str]:
    trees = {_module(p): ast.parse(p.read_text(encoding="utf-8")) for p in sorted(SRC.rglob("*.py"))}
    returns = {(mod, name) for mod, tree in trees.items() for name, fn in _defs(tree)
               if not name.split(".")[-1].startswith("_") and _is_dict_any(fn.returns)}
    crossing = set()
    for mod, tree in trees.items():
        for target, name in _uses(tree, mod):
            if (target, name) in returns and _package(target) != _package(mod):
                crossing.add(f"{target}::{name}")
    return sorted(crossing)


def main() -> int:
    now = found()
    if "--write" in sys.argv[1:]:
        head = ("# Public functions another package calls that still return dict[str, Any] (tools/ci/dict_returns.py, `make\n"
                "# lint`). This list may only shrink: type one, then take its line off.\n")
        ALLOW.write_text(head + "".join(f"{x}\n" for x in now), encoding="utf-8")
        print(f"{len(now)} functions written to {ALLOW.name}")
        return 0
    allowed = [ln.strip() for ln in ALLOW.read_text(encoding="utf-8").splitlines()
               if ln.strip() and not ln.startswith("#")]
    new = sorted(set(now) - set(allowed))
    stale = sorted(set(allowed) - set(now))
    for x in new:
        print(f"{x} returns dict[str, Any] to another package: return a typed value (or, only if it must, add it "
              f"to {ALLOW.relative_to(ROOT)})", file=sys.stderr)
    for x in stale:
        print(f"{x} is on {ALLOW.relative_to(ROOT)} but no longer returns dict[str, Any] to another package: take it "
              "off (the list only shrinks)", file=sys.stderr)
    print(f"dict_returns: {len(now)} public functions return dict[str, Any] across a package boundary "
          f"(allowlist {len(allowed)})")
    return 1 if new or stale else 0


if __name__ == "__main__":
    sys.exit(main())
