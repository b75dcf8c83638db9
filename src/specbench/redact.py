"""Secrets out of everything specbench writes: API keys and secret-looking env values become `***`.

What counts as a secret: the value of `--api-key` / `--admin-api-key` (and `--hf-token`), the string value of a name
ending in the word KEY, TOKEN, SECRET, PASSWORD or CREDENTIAL(S), or with SECRET / PASSWORD / CREDENTIAL anywhere
(`HF_TOKEN`, `OPENAI_API_KEY`, `AWS_SECRET_ACCESS_KEY`; not `TOKENIZERS_PARALLELISM`, `max_tokens`,
`total_token_throughput`, a number), `Authorization: Bearer ...`, the password of a URL's userinfo
(`postgres://user:PASSWORD@host`, as in DATABASE_URL), a secret name followed by `:` in a comment line (`# api_key:
...` in a TOML file), and the known token shapes anywhere in text (TOKEN_SHAPES: Hugging Face `hf_`, GitHub `ghp_` /
`gho_` / `ghu_` / `ghs_` / `ghr_` / `github_pat_`, OpenAI / Anthropic `sk-`, AWS access key ids `AKIA` / `ASIA`,
Slack `xox?-`, GitLab `glpat-`). Every secret value seen in a command or env is remembered for the life of the process, so the
same value is replaced wherever it turns up later (a server log echoing its arguments, a reason string).

The store (matrix/store.py) applies `redact_obj` / `redact_text` in its write functions, so every writer gets it;
report, export, dry-run and plan/doctor output use the same functions. Pure functions, one module-level set.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"
SECRET_FLAGS = frozenset({"--api-key", "--admin-api-key", "--hf-token"})
# a name is secret when its last word is one of these (HF_TOKEN, OPENAI_API_KEY; not total_token_throughput) ...
SECRET_LAST_WORDS = frozenset({"KEY", "APIKEY", "TOKEN", "PAT", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS"})
# ... or any of its words is one of these (AWS_SECRET_ACCESS_KEY, DB_PASSWORD_FILE)
SECRET_WORDS = frozenset({"SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS"})
_NOT_SECRET = frozenset({"", "NONE", "NULL", "TRUE", "FALSE", MASK})
_MIN_LITERAL = 4  # a remembered value shorter than this is not replaced in free text (it would hit digits, words)

_known: set[str] = set()  # secret values seen in this process (commands, envs)

_FLAG_RE = re.compile(r"(--(?:admin-)?api-key|--hf-token)(=|\s+|[\"']\s*,\s*)(\"[^\"]*\"|'[^']*'|[^\s\"',)\]]+)")
_BEARER_RE = re.compile(r"(?i)(authorization[\"']?\s*[:=]\s*[\"']?\s*bearer\s+)([^\s\"',]+)")
_NUMBER_RE = re.compile(r"-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")
_HF_RE = re.compile(r"\bhf_[A-Za-z0-9]{6,}")
# the known token shapes, prefix kept so a reader sees what kind of secret was there (each vendor's documented form)
TOKEN_SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = tuple((name, re.compile(rx)) for name, rx in (
    ("github", r"\b(gh[pousr]_)[A-Za-z0-9]{20,}"),
    ("github_pat", r"\b(github_pat_)[A-Za-z0-9_]{20,}"),
    ("openai", r"(?<![A-Za-z0-9-])(sk-)(?:[A-Za-z0-9]+-)*[A-Za-z0-9_]{16,}"),
    ("aws_access_key_id", r"\b((?:AKIA|ASIA))[0-9A-Z]{16}\b"),
    ("slack", r"\b(xox[abposr]-)[A-Za-z0-9-]{10,}"),
    ("gitlab", r"\b(glpat-)[A-Za-z0-9_-]{20,}"),
))
# scheme://user:password@host: the password of a URL's userinfo (DATABASE_URL, REDIS_URL, a proxy URL)
_URL_USERINFO_RE = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@\"']*:)([^\s@/\"']+)(@)")
# `# api_key: VALUE` in a comment line (TOML, shell, YAML): a secret name then `:` is a key written down
_COMMENT_KEY_RE = re.compile(r"(?m)^([ \t]*#[^\n]*?\b)([A-Za-z][A-Za-z0-9_-]*)(\s*:\s*)([^\s\"',]+)")
# NAME = value (TOML, shell, Python reprs) or "NAME": value (JSON, dict reprs); a bare `name: value` is prose
_ASSIGN_RE = re.compile(r"\b([A-Za-z][A-Za-z0-9_]*)(\s*=\s*|[\"']\s*[:=]\s*)(\"[^\"]*\"|'[^']*'|\[[^\]]*\]|[^\s\"',()={}\[\]]+)")


@functools.lru_cache(maxsize=4096)  # a JSON document repeats its few key names thousands of times (_assign)
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
    for _name, rx in TOKEN_SHAPES:
        text = rx.sub(lambda m: m.group(1) + MASK, text)
    text = _URL_USERINFO_RE.sub(lambda m: m.group(1) + MASK + m.group(3), text)
    text = _COMMENT_KEY_RE.sub(lambda m: m.group(0) if not is_secret_name(m.group(2)) or _NUMBER_RE.fullmatch(
        m.group(4)) else m.group(1) + m.group(2) + m.group(3) + MASK, text)
    return _ASSIGN_RE.sub(_assign, text)


def _assign(m: re.Match[str]) -> str:
    name, sep, value = m.group(1), m.group(2), m.group(3)
    if not is_secret_name(name) or _NUMBER_RE.fullmatch(value):  # a number is a count, never a key
        return m.group(0)
    masked = _mask_value(value)
    if masked == MASK and sep[:1] in ("'", '"'):  # JSON / dict repr: a string keeps the document parseable
        masked = f'"{MASK}"'
    return name + sep + masked


class RedactingStream:
    """A text stream (stdout, stderr) whose every write goes through `redact_text`: whatever a command prints,
    a rich table, a typer echo or an error line, is masked at the one place it leaves the process."""

    def __init__(self, stream: Any):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact_text(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


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
