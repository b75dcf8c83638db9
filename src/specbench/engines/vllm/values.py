"""The value types of vLLM's launch flags, as vLLM's parser converts them: `human_readable_int` (k/m/g/t decimal,
K/M/G/T binary, no decimals with binary suffixes), `human_readable_int_or_auto` (-1 / auto = fit to memory)
(vllm/utils/argparse_utils.py@0.32.0), a switch's `=true/false` word, and `--speculative-config '{json}'`
(vllm/config/speculative.py::SpeculativeConfig). Pure: strings in, values out (FlagError for a bad one).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from specbench.errors import FlagError


def human_readable_int(value: str) -> int:
    """vllm/utils/argparse_utils.py::human_readable_int."""
    v = value.strip()
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", v)
    if m:
        number, suffix = m.groups()
        dec = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
        binary = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
        if suffix in dec:
            return int(float(number) * dec[suffix])
        if "." in number:
            raise FlagError(f"Decimals are not allowed with binary suffixes like {suffix}. "
                            f"Did you mean to use {number}{suffix.lower()} instead?")
        return int(number) * binary[suffix]
    try:
        return int(v)
    except ValueError:
        raise FlagError(f"expected an integer (like 4096, 32k or 2G), got {value!r}") from None


def human_readable_int_or_auto(value: str) -> int:
    """vllm/utils/argparse_utils.py::human_readable_int_or_auto: -1 or 'auto' mean fit to memory."""
    if value.strip().lower() in ("auto", "-1"):
        return -1
    return human_readable_int(value)


def bool_word(v: str) -> bool:
    s = v.strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off"):
        return False
    raise FlagError(f"expected true/false, got {v!r}")


@dataclass(frozen=True)
class SpeculativeConfig:
    """`--speculative-config '{json}'` (vllm/config/speculative.py::SpeculativeConfig)."""

    method: str | None
    model: str | None
    num_speculative_tokens: int
    draft_tensor_parallel_size: int | None = None
    raw: tuple[tuple[str, str], ...] = ()

    @property
    def kind(self) -> str:
        """The method name vLLM resolves: given, else 'draft_model' with a model, 'ngram' without."""
        if self.method:
            return self.method
        return "draft_model" if self.model else "ngram"


def parse_speculative_config(text: str) -> SpeculativeConfig:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FlagError(f"--speculative-config is not valid JSON: {exc.msg} (at {exc.pos})") from None
    if not isinstance(data, dict):
        raise FlagError("--speculative-config must be a JSON object")
    k = data.get("num_speculative_tokens")
    if k is None:
        raise FlagError("--speculative-config needs num_speculative_tokens")
    # config/speculative.py::SpeculativeConfig.num_speculative_tokens: int (pydantic, strict about fractions)@0.32.0:
    # 2.5 is refused ("Input should be a valid integer, got a number with a fractional part"), never read as 2
    if isinstance(k, bool) or not (isinstance(k, int) or (isinstance(k, float) and k.is_integer())
                                   or (isinstance(k, str) and k.strip().lstrip("-").isdigit())):
        raise FlagError(f"--speculative-config: num_speculative_tokens must be an integer, got {k!r} (vLLM: Input "
                        "should be a valid integer)")
    k = int(k)
    if k < 1:
        raise FlagError(f"--speculative-config: num_speculative_tokens must be at least 1, got {k}")
    dtp = data.get("draft_tensor_parallel_size")
    method = data.get("method")
    return SpeculativeConfig(method=str(method) if method else None,
                             model=str(data["model"]) if data.get("model") else None,
                             num_speculative_tokens=k,
                             draft_tensor_parallel_size=int(dtp) if dtp is not None else None,
                             raw=tuple(sorted((str(a), json.dumps(b)) for a, b in data.items())))
