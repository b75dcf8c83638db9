"""`specbench calibrate --quick MATRIX`: the smallest matrix that pins the step model's constants for one GPU, engine
release and model, derived from the user's own matrix (its engine, command, [plan], first server settings).

What it measures, and why each cell is there (predict/model.py, the constants it pins):
- AR at two concurrencies (1 and the user's largest, capped at QUICK_C_MAX) x two prompt lengths (the user's
  shortest and LONG_FACTOR x it, within the context length): the per-step floor a + al*L, the per-sequence cost p,
  the efficiency e and the context term h (the KV read grows with prompt x batch);
- one speculative configuration (the user's first EAGLE / MTP / block-draft one) on the same grid, at two simulated
  accept lengths (the engine's own switch, engines/simulate.py): the per-draft-forward cost d and the per-sequence
  verify cost q; two accept lengths separate the step (which does not depend on acceptance) from its use;
- few requests (QUICK_WAVES waves, one repeat): the step time of a cell is the mean over every decode step of its
  requests, already ~128 x waves x c steps, so a second repeat moves it by well under the fit's residual.
Pure: TOML document in, TOML document out (the command runs it with the runner and calibrates the store).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass

from specbench.predict.model import method_of

QUICK_C_MAX = 32        # the largest concurrency a quick calibration measures (beyond it: "extrapolated")
LONG_FACTOR = 4         # the long prompt is 4x the short one (512 -> 2,048)
LONG_MAX = 8192
QUICK_WAVES = 2
ACCEPT_LENGTHS = (2.0, 3.0)
# Boot of one SGLang 0.5.15 server with CUDA graphs, Qwen3-8B, H100 (tests/data/h100-context-sglang-0.5.15.post1/
# h100-quick-8of12.db: servers.started_at to its first cell): 216 s for the first boot on a fresh machine (Triton JIT
# and graph capture with cold caches), 105 s for the next; the gpu-decide servers took 56-117 s each with cells.
FIRST_BOOT_S = 210.0
BOOT_S = 105.0
SERVER_KEYS = ("tp", "mem_fraction_static", "max_running_requests", "context_length")


@dataclass(frozen=True)
class QuickPlan:
    """The quick matrix, and what it will measure."""

    doc: dict[str, object]  # the quick matrix as a TOML document (tomli_w writes it)
    spec_label: str | None      # the speculative configuration it measures, e.g. "eagle3" (None: the matrix has none)
    concurrencies: tuple[int, ...]
    prompts: tuple[int, ...]
    output_tokens: int
    notes: tuple[str, ...]

    simulated: bool = True

    @property
    def servers(self) -> int:
        return 1 + ((len(ACCEPT_LENGTHS) if self.simulated else 1) if self.spec_label else 0)

    @property
    def cells(self) -> int:
        return self.servers * len(self.concurrencies) * len(self.prompts)


def _first(v: object) -> object:
    return v[0] if isinstance(v, list) and v else v


def _table(v: object) -> dict[str, object]:
    """A TOML table of the (already validated) matrix as a new dict; absent: empty."""
    return dict(v) if isinstance(v, dict) else {}


def _ints(v: object) -> list[int]:
    vals = v if isinstance(v, list) else [v]
    return [int(x) for x in vals if isinstance(x, (int, float)) and not isinstance(x, bool)]


def _spec_variants(doc: Mapping[str, object]) -> list[dict[str, object]]:
    specs = _table(doc.get("server")).get("spec")
    return [dict(s) for s in specs if isinstance(s, dict)] if isinstance(specs, list) else []


def _pick_spec(specs: list[dict[str, object]]) -> dict[str, object] | None:
    """The first variant whose method has a draft step the engine can simulate acceptance for."""
    for s in specs:
        alg = _first(s.get("algorithm"))
        if alg is not None and not isinstance(alg, str):  # no name: no method (as an unknown name)
            continue
        try:
            m = method_of(alg)
        except ValueError:
            continue
        if m in ("eagle", "mtp", "block"):
            out = {k: _first(v) for k, v in s.items() if k not in ("simulated_accept_len", "label")}
            flags = {k: _first(v) for k, v in _table(s.get("flags")).items()}
            env = _table(s.get("env"))
            out.pop("flags", None), out.pop("env", None)
            if flags:
                out["flags"] = flags
            if env:
                out["env"] = env
            base = str(s.get("label") or out.get("algorithm") or "spec").split("{")[0].rstrip("-_")
            out["label"] = base.removesuffix("-sim").removesuffix("sim").rstrip("-_") or "spec"
            return out
    return None


def _max_accept(spec: Mapping[str, object]) -> float:
    """The most a verify step can accept: draft tokens (chains: num_steps + 1), the bonus included."""
    dt = spec.get("num_draft_tokens")
    steps = spec.get("num_steps")
    if isinstance(dt, int) and dt > 0:
        return float(dt)
    if isinstance(steps, int) and steps > 0:
        return float(steps + 1)
    return 16.0


def quick_matrix(doc: Mapping[str, object], simulate: bool = True) -> QuickPlan:
    """The quick calibration matrix of a user's matrix document (tomllib.loads of its text). `simulate` False (the
    engine cannot simulate acceptance): the speculative configuration runs once, at the acceptance the user's
    dataset gives, on that dataset."""
    notes: list[str] = []
    out: dict[str, object] = {k: copy.deepcopy(v) for k, v in doc.items()
                           if k not in ("server", "client", "override", "phases", "name")}
    out["name"] = f"{doc.get('name') or 'matrix'}-quick-calibration"
    server_in = _table(doc.get("server"))
    server: dict[str, object] = {k: _first(v) for k, v in server_in.items() if k in SERVER_KEYS}
    for table in ("flags", "env"):
        vals = {k: _first(v) for k, v in _table(server_in.get(table)).items()}
        if vals:
            server[table] = vals
    spec = _pick_spec(_spec_variants(doc))
    variants: list[dict[str, object]] = [{"label": "ar"}]
    if spec is not None:
        hi = min(ACCEPT_LENGTHS[1], _max_accept(spec))
        lo = min(ACCEPT_LENGTHS[0], 1.0 + (hi - 1.0) / 2)
        base = str(spec["label"])  # _pick_spec's: a str
        if simulate:
            spec["label"] = base + "-sim{simulated_accept_len}"
            spec["simulated_accept_len"] = sorted({round(lo, 2), round(hi, 2)})
        variants.append(spec)
    else:
        notes.append("the matrix has no EAGLE / MTP / block-draft configuration: AR only (the draft constants stay "
                     "those of the shipped calibration)")
    server["spec"] = variants
    client_in = _table(doc.get("client"))
    conc = _ints(client_in.get("concurrency", 1)) or [1]
    c_hi = max(4, min(max(conc), QUICK_C_MAX))
    if max(conc) > QUICK_C_MAX:
        notes.append(f"concurrency {max(conc)} is above the quick calibration's {QUICK_C_MAX}: predictions there are "
                     "extrapolated")
    prompts = _ints(client_in.get("prompt_tokens", 256)) or [256]
    outs = _ints(client_in.get("output_tokens", 64)) or [64]
    p_lo, out_tok = min(prompts), outs[0]
    p_hi = min(max(max(prompts), LONG_FACTOR * p_lo), LONG_MAX)
    ctx = server.get("context_length")
    if isinstance(ctx, int) and ctx > 0 and p_hi + out_tok + 64 > ctx:
        server["context_length"] = p_hi + out_tok + 64
        notes.append(f"context_length {ctx} raised to {server['context_length']} for the long prompt ({p_hi} tokens)")
    prompt_axis = sorted({p_lo, p_hi})
    out["server"] = server
    client: dict[str, object] = {
        "concurrency": sorted({1, c_hi}), "prompt_tokens": prompt_axis, "output_tokens": out_tok,
        "num_requests": QUICK_WAVES, "requests_per_concurrency": QUICK_WAVES, "warmup_requests": 2, "repeats": 1,
        "dataset": "random"}
    out["client"] = client
    if not simulate and spec is not None:
        client["dataset"] = _first(client_in.get("dataset", "specbench-mini"))
        client["prompt_len"] = "fixed"
    for k in ("temperature", "ignore_eos", "api", "category"):
        if k in client_in:
            client[k] = _first(client_in[k])
    return QuickPlan(out, base if spec else None, tuple(sorted({1, c_hi})), tuple(prompt_axis), out_tok,
                     tuple(notes), simulate)


def estimate_s(plan: QuickPlan, cell_s: Mapping[tuple[str, int, int], float]) -> float:
    """Wall seconds: the boots (the first FIRST_BOOT_S, the rest BOOT_S) plus each cell's requests, from their
    predicted latency
    (`cell_s`: (label kind 'ar' | 'spec', concurrency, prompt) -> seconds of one request; waves + warm-up)."""
    total = FIRST_BOOT_S + (plan.servers - 1) * BOOT_S
    for kind in ("ar", "spec") if plan.spec_label else ("ar",):
        reps = 1 if kind == "ar" or not plan.simulated else len(ACCEPT_LENGTHS)
        for c in plan.concurrencies:
            for p in plan.prompts:
                one = cell_s.get((kind, c, p), math.nan)
                if math.isfinite(one):
                    total += reps * one * (QUICK_WAVES + 1)
    return total
