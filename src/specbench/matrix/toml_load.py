"""A matrix file -> a validated `MatrixSpec`, every problem named as `file:line: key: message`.

pydantic gives the key path of a problem; `key_lines` finds the line of that path in the TOML text (tables,
arrays of tables with their index, dotted and quoted keys, multi-line values).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from specbench.errors import UserError
from specbench.matrix.schema import MatrixSpec
from specbench.userfile import read_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")


def _split_key(text: str) -> list[str]:
    """`a."b.c".d` -> ["a", "b.c", "d"]."""
    parts, cur, quote = [], "", None
    for ch in text:
        if quote:
            if ch == quote:
                quote = None
            else:
                cur += ch
        elif ch in "\"'":
            quote = ch
        elif ch == ".":
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    parts.append(cur.strip())
    return parts


def _key_part(line: str) -> str | None:
    """The key of a `key = value` line, or None."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "=":
            return line[:i].strip() or None
        elif ch == "#":
            return None
    return None


def key_lines(text: str) -> dict[tuple[Any, ...], int]:
    """Map every key path of a TOML document to its 1-based line (array-of-tables carry their index)."""
    lines: dict[tuple[Any, ...], int] = {}
    table: tuple[Any, ...] = ()
    counts: dict[tuple[Any, ...], int] = {}
    depth = 0  # open brackets of a multi-line value
    for no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if depth > 0:
            depth += line.count("[") + line.count("{") - line.count("]") - line.count("}")
            continue
        if not line or line.startswith("#"):
            continue
        m = _HEADER.match(line)
        if m and "=" not in line.split("#")[0]:
            path = tuple(_split_key(m.group(2)))
            if m.group(1) == "[[":
                # an array of tables: [[server.spec]] is server.spec[i]; parents may be arrays too
                base = _resolve_parent(path[:-1], counts)
                arr = base + (path[-1],)
                idx = counts.get(arr, 0)
                counts[arr] = idx + 1
                table = arr + (idx,)
                lines.setdefault(arr, no)
            else:
                table = _resolve_parent(path[:-1], counts) + (path[-1],)
            lines.setdefault(table, no)
            continue
        key = _key_part(line)
        if key is None:
            continue
        path = table + tuple(_split_key(key))
        for i in range(len(table) + 1, len(path) + 1):
            lines.setdefault(path[:i], no)
        value = line.split("=", 1)[1]
        depth = value.count("[") + value.count("{") - value.count("]") - value.count("}")
        depth = max(depth, 0)
    return lines


def _resolve_parent(path: tuple[Any, ...], counts: dict[tuple[Any, ...], int]) -> tuple[Any, ...]:
    out: tuple[Any, ...] = ()
    for part in path:
        out = out + (part,)
        if out in counts:  # inside the latest element of an array of tables
            out = out + (counts[out] - 1,)
    return out


def line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """The line of the longest prefix of `loc` that the text names."""
    table = key_lines(text)
    # pydantic names the alias of an aliased field; union members add their type name to the path
    clean = tuple(p for p in loc if not (isinstance(p, str) and ("[" in p or p in _UNION_TAGS)))
    for n in range(len(clean), 0, -1):
        if clean[:n] in table:
            return table[clean[:n]]
    return None


_UNION_TAGS = {"int", "float", "str", "bool", "list", "dict", "none", "function-after", "function-before"}


def _format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for p in loc:
        if isinstance(p, int):
            out += f"[{p}]"
        elif isinstance(p, str) and ("[" in p or p in _UNION_TAGS):
            continue
        else:
            out += ("." if out else "") + str(p)
    return out or "(top level)"


# A matrix file is a few kilobytes and a few levels deep; these bounds are checked before the parser runs (a deeply
# nested value is a RecursionError inside tomllib, a huge file a long wait), and again on the parsed document
# (dotted keys nest without brackets)
MAX_BYTES = 4 << 20
MAX_DEPTH = 24


def _bracket_depth(text: str) -> tuple[int, int]:
    """The deepest nesting of `[` / `{` outside strings and comments, and the line where it is first reached."""
    depth = deepest = 0
    line = where = 1
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
        elif ch == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        elif ch in "\"'":
            q = text[i:i + 3] if text[i:i + 3] in ('"""', "'''") else ch
            j = i + len(q)
            while j < n and text[j:j + len(q)] != q:
                if text[j] == "\\" and ch == '"':
                    j += 1
                elif text[j] == "\n":
                    if len(q) == 1:
                        break
                    line += 1
                j += 1
            i = j + len(q)
            continue
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest, where = depth, line
        elif ch in "]}":
            depth = max(0, depth - 1)
        i += 1
    return deepest, where


def _doc_depth(data: Any) -> int:
    """The nesting depth of a parsed document, without recursion."""
    deepest, stack = 0, [(data, 1)]
    while stack:
        v, d = stack.pop()
        deepest = max(deepest, d)
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
    return deepest


def _check_bounds(text: str, source: str) -> None:
    size = len(text.encode("utf-8", errors="replace"))
    if size > MAX_BYTES:
        raise UserError(f"{source}: the matrix file is {size} bytes; a matrix file is at most {MAX_BYTES} bytes")
    if "\0" in text:
        raise UserError(f"{source}:{text[:text.index(chr(0))].count(chr(10)) + 1}: a NUL byte: not a TOML text file")
    depth, line = _bracket_depth(text)
    if depth > MAX_DEPTH:
        raise UserError(f"{source}:{line}: values nested {depth} levels deep; a matrix file nests at most "
                        f"{MAX_DEPTH}")


def parse_matrix(text: str, source: str = "<matrix>", base_dir: str | Path | None = None) -> MatrixSpec:
    """Validate TOML text; raise UserError naming `source:line: key: problem`. Relative dataset paths are read from
    `base_dir` (load_matrix: the matrix file's folder; else the working directory)."""
    _check_bounds(text, source)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{source}: not valid TOML: {exc}") from None
    except RecursionError:
        raise UserError(f"{source}: values nested too deeply to read; a matrix file nests at most {MAX_DEPTH}") from None
    if _doc_depth(data) > MAX_DEPTH:
        raise UserError(f"{source}: keys nested more than {MAX_DEPTH} levels deep (dotted keys or tables)")
    try:
        spec = MatrixSpec.model_validate(data, context={"matrix_dir": str(base_dir) if base_dir else None})
    except ValidationError as exc:
        problems = []
        seen = set()
        for err in exc.errors():
            loc = tuple(err["loc"])
            key = _format_loc(loc)
            if key in seen:  # a union reports each member; the first is enough
                continue
            seen.add(key)
            line = line_of(text, loc)
            where = f"{source}:{line}" if line else source
            msg = err["msg"].removeprefix("Value error, ")
            problems.append(f"{where}: {key}: {msg}")
        raise UserError("; ".join(problems[:5]) + (f" (+{len(problems) - 5} more)" if len(problems) > 5 else "")) from None
    from specbench.matrix.expansion import size_problem

    size = size_problem(spec)
    if size is not None:
        line = line_of(text, size[1])
        raise UserError(f"{source}:{line}: {size[0]}" if line else f"{source}: {size[0]}")
    return resolve_paths(spec, text, source, base_dir)


def _where(text: str, source: str, loc: tuple[Any, ...]) -> str:
    line = line_of(text, loc)
    return f"{source}:{line}" if line else source


def _local_path(value: str, base: Path, must: bool) -> Path | None:
    """A matrix value as a local path, read from the matrix file's folder when relative. `must`: the value is
    always a path (tokenizer); otherwise (a drafter: a folder or a Hub name) only when it is written as one
    (`./x`, `../x`, `/x`, `~/x`) or names a folder next to the matrix."""
    p = Path(value).expanduser()
    looks = value.startswith((".", "/", "~"))
    full = p if p.is_absolute() else base / p
    if must or looks or full.is_dir():
        return full.resolve()
    return None


def resolve_paths(spec: MatrixSpec, text: str, source: str, base_dir: str | Path | None) -> MatrixSpec:
    """Every local path of a matrix (tokenizer, drafter folders; dataset files are read by client_checks.py with
    the same base) resolves against the matrix file's folder, one rule for all, and must exist: a missing one is a
    one-line error here, in --dry-run as in a run, before any server boots. An absolute drafter path that is not here
    is kept as written (a matrix for a GPU machine names that machine's folders: `examples/h200-*.toml`); the
    spec's `remote_paths` says so and `run` / `--dry-run` print it."""
    base = Path(base_dir) if base_dir else Path.cwd()
    update: dict[str, Any] = {}
    if spec.tokenizer:
        tok = _local_path(spec.tokenizer, base, must=True)
        assert tok is not None
        if not (tok / "tokenizer.json").is_file():
            why = "no such folder" if not tok.exists() else "no tokenizer.json in it"
            raise UserError(f"{_where(text, source, ('tokenizer',))}: tokenizer: {tok}: {why} (a relative path is "
                            "read from the matrix file's folder)")
        update["tokenizer"] = str(tok)
    variants, far = [], []
    for i, v in enumerate(spec.server.spec):
        draft = v.draft_model or ""
        path = _local_path(draft, base, must=False) if draft else None
        if path is not None and not path.is_dir() and Path(draft).expanduser().is_absolute():
            far.append(f"server.spec[{i}].draft_model: {path}: not a folder on this machine (kept as written: the "
                       "server must find it where it runs)")
        elif path is not None and not path.is_dir():
            raise UserError(f"{_where(text, source, ('server', 'spec', i, 'draft_model'))}: server.spec[{i}]."
                            f"draft_model: {path}: no such folder (a relative path is read from the matrix file's "
                            "folder; a Hub model is written as ORG/NAME)")
        variants.append(v.model_copy(update={"draft_model": str(path)}) if path is not None else v)
    if any(a is not b for a, b in zip(variants, spec.server.spec)):
        update["server"] = spec.server.model_copy(update={"spec": variants})
    out = spec.model_copy(update=update) if update else spec  # model_copy keeps the matrix folder (private)
    out._remote_paths = tuple(far)
    return out


def load_matrix(path: str | Path) -> tuple[MatrixSpec, str]:
    """Read and validate a matrix file; returns the spec and its text (stored with the results)."""
    p = Path(path)
    try:  # a regular UTF-8 file of at most MAX_BYTES (userfile.py: a FIFO, a device, a store is one line at once)
        text = read_text(p, "matrix file", MAX_BYTES)
    except FileNotFoundError:
        raise UserError(f"{p}: no such matrix file") from None
    except OSError as exc:
        raise UserError(f"{p}: cannot read: {exc.strerror or exc}") from None
    return parse_matrix(text, str(p), p.parent), text
