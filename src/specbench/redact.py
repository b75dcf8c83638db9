"""Secrets out of everything specbench writes: API keys and secret-looking env values become `***`.

What counts as a secret: the value of `--api-key` / `--admin-api-key` (and `--hf-token`), the string value of a name
ending in the word KEY, TOKEN, SECRET, PASSWORD or CREDENTIAL(S), or with SECRET / PASSWORD / CREDENTIAL anywhere
(`HF_TOKEN`, `OPENAI_API_KEY`, `AWS_SECRET_ACCESS_KEY`; not `TOKENIZERS_PARALLELISM`, `max_tokens`,
`total_token_throughput`, a number), `Authorization: Bearer ...`, and Hugging Face `hf_...` tokens
anywhere in text. Every secret value seen in a command or env is remembered for the life of the process, so the
same value is replaced wherever it turns up later (a server log echoing its arguments, a reason string).

The store (matrix/store.py) applies `redact_obj` / `redact_text` in its write functions, so every writer gets it;
report, export, dry-run and plan/doctor output use the same functions. Pure functions, one module-level set.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"
SECRET_FLAGS = frozenset({"--api-key", "--admin-api-key", "--hf-token"})
# a name is secret when its last word is one of these (HF_TOKEN, OPENAI_API_KEY; not total_token_throughput) ...
SECRET_LAST_WORDS = frozenset({"KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS"})
# ... or any of its words is one of these (AWS_SECRET_ACCESS_KEY, DB_PASSWORD_FILE)
SECRET_WORDS = frozenset({"SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS"})
_NOT_SECRET = frozenset({"", "NONE", "NULL", "TRUE", "FALSE", MASK})
_MIN_LITERAL = 4  # a remembered value shorter than this is not replaced in free text (it would hit digits, words)

_known: set[str] = set()  # secret values seen in this process (commands, envs)

_FLAG_RE = re.compile(r"(--(?:admin-)?api-key|--hf-token)(=|\s+|[\"']\s*,\s*)(\"[^\"]*\"|'[^']*'|[^\s\"',)\]]+)")
_BEARER_RE = re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?\s*bearer\s+)([^\s\"',]+)")
_NUMBER_RE = re.compile(r"-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")
_HF_RE = re.compile(r"\bhf_[A-Za-z0-9]{6,}")
# NAME = value (TOML, shell, Python reprs) or "NAME": value (JSON, dict reprs); a bare `name: value` is prose
_ASSIGN_RE = re.compile(r"\b([A-Za-z][A-Za-z0-9_]*)(\s*=\s*|[\"']\s*[:=]\s*)(\"[^\"]*\"|'[^']*'|\[[^\]]*\]|[^\s\"',()={}\[\]]+)")


def is_secret_name(name: str) -> bool:
    """An env / setting name with a secret word: `HF_TOKEN`, `api_key`, `OPENAI_API_KEY` (words split on `_`/`-`)."""
    words = [w for w in re.split(r"[_\-]+", name.strip().upper()) if w]
    if words == ["KEY"]:  # a bare `key` names a field (contracts.py budget components), not a secret
        return False
    return bool(words) and (words[-1] in SECRET_LAST_WORDS or any(w in SECRET_WORDS for w in words)) or name.strip().lower() in {f.lstrip("-").replace("-", "_")
                                                                              for f in SECRET_FLAGS}


def remember(values: Iterable[str]) -> None:
    """Secret values to replace wherever they appear later in this process."""
    for v in values:
        v = str(v).strip().strip("'\"")
        if len(v) >= _MIN_LITERAL and v.upper() not in _NOT_SECRET:
            _known.add(v)


def _mask_value(v: str) -> str:
    if v.strip("'\"[]").upper() in _NOT_SECRET:
        return v
    q = v[0] if v[:1] in ("'", '"') and v[-1:] == v[:1] and len(v) > 1 else ""
    return f"{q}{MASK}{q}" if q else MASK


def redact_text(text: str) -> str:
    """Free text (a log, a reason, a TOML file, a shell line) with every secret pattern and remembered value masked."""
    if not text:
        return text
    for v in sorted(_known, key=len, reverse=True):
        if v in text:
            text = text.replace(v, MASK)
    text = _FLAG_RE.sub(lambda m: m.group(1) + m.group(2) + _mask_value(m.group(3)), text)
    text = _BEARER_RE.sub(lambda m: m.group(1) + MASK, text)
    text = _HF_RE.sub("hf_" + MASK, text)
    return _ASSIGN_RE.sub(_assign, text)


def _assign(m: re.Match[str]) -> str:
    name, sep, value = m.group(1), m.group(2), m.group(3)
    if not is_secret_name(name) or _NUMBER_RE.fullmatch(value):  # a number is a count, never a key
        return m.group(0)
    masked = _mask_value(value)
    if masked == MASK and sep[:1] in ("'", '"'):  # JSON / dict repr: a string keeps the document parseable
        masked = f'"{MASK}"'
    return name + sep + masked


def redact_argv(argv: Iterable[Any]) -> list[Any]:
    """A command as a list: the word after a secret flag, `--api-key=X`, `NAME=X` of a secret env name masked."""
    out: list[Any] = []
    secret_next = False
    for w in argv:
        if not isinstance(w, str):
            out.append(w)
            secret_next = False
            continue
        if secret_next:
            remember([w])
            out.append(MASK)
            secret_next = False
            continue
        flag, eq, val = w.partition("=")
        if w in SECRET_FLAGS:
            secret_next = True
            out.append(w)
        elif eq and (flag in SECRET_FLAGS or (not flag.startswith("-") and is_secret_name(flag))):
            remember([val])
            out.append(f"{flag}={_mask_value(val)}" if val else w)
        else:
            out.append(redact_text(w))
    return out


def redact_env(env: Mapping[str, Any]) -> dict[str, Any]:
    """An env mapping with the values of secret names masked (and remembered)."""
    out: dict[str, Any] = {}
    for k, v in env.items():
        if is_secret_name(str(k)) and isinstance(v, str) and v.upper() not in _NOT_SECRET:
            remember([str(v)])
            out[k] = MASK
        else:
            out[k] = redact_obj(v)
    return out


def redact_obj(obj: Any) -> Any:
    """Any JSON-like value: mappings by key name, lists of words as commands, strings as free text."""
    if isinstance(obj, Mapping):
        return redact_env(obj)
    if isinstance(obj, (list, tuple)):
        if all(isinstance(w, str) for w in obj):
            return redact_argv(obj)
        return [redact_obj(x) for x in obj]
    if isinstance(obj, str):
        return redact_text(obj)
    return obj


def learn(argv: Iterable[Any] = (), env: Mapping[str, Any] | None = None) -> None:
    """Remember the secrets of a command and an env without writing anything (before their output is printed)."""
    redact_argv(list(argv))
    if env:
        redact_env(env)
