"""The one reader of Prometheus text exposition (GET /metrics of vLLM and SGLang), on prometheus_client's parser.

- `samples(text)`: {sample name: value summed over its label sets}; `_created` samples (timestamps) and NaN skipped.
- `labels(text, name)`: the label set of an info-style metric (`vllm:cache_config_info{block_size="16",...} 1.0`).
- `spec_counters(text)` / `spec_decode(text)`: vLLM's spec-decode counters, totals and per draft position
  (vllm/v1/metrics/loggers.py: `vllm:spec_decode_num_drafts`, `_num_draft_tokens`, `_num_accepted_tokens`,
  `_num_accepted_tokens_per_pos{position="i"}`).

Names: prometheus_client strips `_total` from a counter's *family* name but the *sample* keeps it, so everything
here is keyed by sample name (`vllm:spec_decode_num_drafts_total`); older vLLM names without `_total` are read too.
Malformed text never raises: the parser stops at the first bad line, so such text is read again line by line and
every line that parses counts (as the regex reader this replaces did).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

Sample = tuple[str, dict[str, str], float]  # (sample name, labels, value)

SPEC_PREFIX = "vllm:spec_decode_"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"


def _parse(text: str) -> Iterator[Sample]:
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            yield s.name, dict(s.labels), float(s.value)


def parsed(text: str) -> list[Sample]:
    """Every sample of an exposition text, in order; bad lines are skipped."""
    if not text:
        return []
    try:
        return list(_parse(text))
    except Exception:  # noqa: BLE001 - the parser raises ValueError, IndexError, ... on malformed text
        pass
    out: list[Sample] = []
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            out.extend(_parse(line + "\n"))
        except Exception:  # noqa: BLE001
            continue
    return out


def samples(text: str) -> dict[str, float]:
    """{sample name: value summed over its label sets}; `_created` samples and NaN values skipped."""
    out: dict[str, float] = {}
    for name, _labels, v in parsed(text):
        if name.endswith("_created") or math.isnan(v):
            continue
        out[name] = out.get(name, 0.0) + v
    return out


def labels(text: str, metric_name: str) -> dict[str, str] | None:
    """The label set of the first sample named `metric_name` (an info-style metric); None when absent."""
    for name, labs, _v in parsed(text):
        if name == metric_name:
            return labs
    return None


def counter(values: Mapping[str, float], base: str) -> float:
    """A counter from `samples()`: `base_total` (prometheus_client's export), else `base` (older vLLM), else 0."""
    return values.get(base + "_total", values.get(base, 0.0))


@dataclass(frozen=True, slots=True)
class SpecCounters:
    """vLLM spec-decode counters (one /metrics scrape, or a delta of two)."""

    drafts: float = 0.0
    draft_tokens: float = 0.0
    accepted: float = 0.0
    accepted_per_pos: tuple[float, ...] = ()  # accepted tokens at draft position 0, 1, ...

    @property
    def accept_length(self) -> float | None:
        """1 + accepted / drafts; None when nothing was drafted."""
        return 1.0 + self.accepted / self.drafts if self.drafts > 0 else None

    @property
    def acceptance_rate(self) -> float | None:
        return self.accepted / self.draft_tokens if self.draft_tokens > 0 else None

    def minus(self, before: SpecCounters) -> SpecCounters:
        n = max(len(self.accepted_per_pos), len(before.accepted_per_pos))
        a = self.accepted_per_pos + (0.0,) * (n - len(self.accepted_per_pos))
        b = before.accepted_per_pos + (0.0,) * (n - len(before.accepted_per_pos))
        return SpecCounters(self.drafts - before.drafts, self.draft_tokens - before.draft_tokens,
                            self.accepted - before.accepted, tuple(x - y for x, y in zip(a, b)))


def _per_pos(rows: list[Sample]) -> tuple[float, ...]:
    by_pos: dict[int, float] = {}
    for name, labs, v in rows:
        if name in (PER_POS + "_total", PER_POS) and not math.isnan(v):
            try:
                pos = int(labs.get("position", ""))
            except ValueError:
                continue
            by_pos[pos] = by_pos.get(pos, 0.0) + v
    return tuple(by_pos.get(i, 0.0) for i in range(max(by_pos) + 1)) if by_pos else ()


def spec_counters(text: str) -> SpecCounters:
    """The spec-decode counters of one /metrics scrape (summed over engines and models)."""
    rows = parsed(text)
    values = samples(text)
    return SpecCounters(drafts=counter(values, SPEC_PREFIX + "num_drafts"),
                        draft_tokens=counter(values, SPEC_PREFIX + "num_draft_tokens"),
                        accepted=counter(values, SPEC_PREFIX + "num_accepted_tokens"),
                        accepted_per_pos=_per_pos(rows))


def spec_delta(before_text: str, after_text: str) -> SpecCounters:
    """Spec-decode counters accumulated between two /metrics scrapes (one cell)."""
    return spec_counters(after_text).minus(spec_counters(before_text))


def spec_decode(text: str) -> dict[str, float]:
    """Each `vllm:spec_decode_*_total` counter summed, keyed without `vllm:`; per-position counters keyed
    `<name>[<position>]`; `mean_acceptance_length` = 1 + accepted / drafts (vLLM's SpecDecoding log line)."""
    out: dict[str, float] = {}
    for name, labs, value in parsed(text):
        if not name.startswith(SPEC_PREFIX) or not name.endswith("_total") or math.isnan(value):
            continue
        key = name.removeprefix("vllm:")
        if "position" in labs:
            key = f"{key}[{labs['position']}]"
        out[key] = out.get(key, 0.0) + value
    drafts = out.get("spec_decode_num_drafts_total", 0.0)
    if drafts > 0:
        out["mean_acceptance_length"] = 1.0 + out.get("spec_decode_num_accepted_tokens_total", 0.0) / drafts
    return out
