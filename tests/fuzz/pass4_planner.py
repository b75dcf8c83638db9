"""Pass 4 of the fuzz, planner inputs (issue 37 items 3, 7, 8; issue 36 items 2, 4, 6): `specbench plan` of launch
commands and logs a user plausibly gets wrong, each with its oracle written before the run:

- `--from-log LOG -- CMD` across what does not transfer (another engine, another checkpoint) is a one-line error
  naming both; the same model is planned on the log's GPU;
- vLLM `--quantization` against the checkpoint (bf16, a local AWQ folder) and `--speculative-config` slips end as vLLM's
  own failure (status `fails`, its words) or a one-line error, never a start;
- releases older than any read plan with a warning, unreadable or unknown-major ones are one-line errors;
- a stand-in's synthesized quantization never decides a verdict against the user's `--quantization`;
- FP8 weights on SM 8.x carry the weight-only caveat (never on SM 8.9+), and a MoE whose Marlin memory does not fit
  fails as `fp8_marlin_oom` with a fix below the asked fraction;
- usage slips of specbench's own CLI are one line.
Cases run offline (HF_HUB_OFFLINE, an empty HF_HOME): `run(case)` sets that around each fork."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from fuzz.harness import Case, Result, environment, run_case

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
CONFIGS = ROOT / "src" / "specbench" / "data" / "configs"
VLLM_V0_LOG = DATA / "doctor_corpus" / "004-vllm-started-llama8b-3090-20k.log"
SGLANG_LOG = DATA / "sglang-0.5.15.post1" / "llama31_8b_mrr8.log"
SGL = ["python", "-m", "sglang.launch_server", "--model-path"]


def _json(res: Result) -> dict | None:
    try:
        d = json.loads(res.stdout)
    except ValueError:
        return None
    return d if isinstance(d, dict) else None


def _plan_says(status: str, *words: str, warning: str | None = None, kind: str | None = None
               ) -> Callable[[Result], str | None]:
    def oracle(res: Result) -> str | None:
        d = _json(res)
        if d is None:
            return f"no plan JSON: {res.stdout[:160]!r}"
        if d.get("status") != status:
            return f"status {d.get('status')} ({(d.get('error') or '')[:160]}), not {status}"
        if kind is not None and d.get("error_kind") != kind:
            return f"error_kind {d.get('error_kind')}, not {kind}"
        text = d.get("error") or ""
        missing = [w for w in words if w not in text]
        if missing:
            return f"the error does not say {missing}: {text[:200]}"
        if warning is not None and not any(warning in w for w in d.get("warnings") or []):
            return f"no warning saying {warning!r}: {[w[:80] for w in d.get('warnings') or []]}"
        return None
    return oracle


def _no_warning(word: str) -> Callable[[Result], str | None]:
    def oracle(res: Result) -> str | None:
        d = _json(res)
        if d is None:
            return f"no plan JSON: {res.stdout[:160]!r}"
        hit = [w for w in d.get("warnings") or [] if word in w]
        return f"a warning says {word!r} where it must not: {hit[0][:160]}" if hit else None
    return oracle


def _plan(*argv: str, gpu: str = "H100 80GB", extra: tuple[str, ...] = ()) -> list[str]:
    return ["plan", "--json", "--no-fixes", "--gpu", gpu, *extra, "--", *argv]


def _from_log(tmp: Path) -> list[Case]:
    out: list[Case] = []
    renamed = tmp / "boot-named.log"  # the real H200 boot with a model path that resolves here
    renamed.write_text(SGLANG_LOG.read_text(encoding="utf-8").replace("/tmp/models/llama31_8b",
                                                                      "meta-llama/Llama-3.1-8B-Instruct"),
                       encoding="utf-8")
    others = ("Qwen/Qwen3-8B", "Qwen/Qwen3-32B", "Qwen/Qwen3-30B-A3B", "meta-llama/Llama-3.1-70B-Instruct",
              "Qwen/Qwen3-0.6B")
    def refused_or_assumed(res: Result) -> str | None:
        # the V0 excerpt names no model: one of Llama-3.1-8B's size (Qwen3-8B) can only be taken as CMD's, said so
        d = _json(res)
        notes = " ".join((d or {}).get("from_log", {}).get("notes", [])) if d else ""
        return None if "taken as CMD's" in notes else f"accepted without saying what it assumed: {notes[:160]}"
    for m in others:
        for log in (VLLM_V0_LOG,):
            out.append(Case("from-log", ["plan", "--json", "--no-fixes", "--from-log", str(log), "--", "vllm", "serve",
                                         m], f"vLLM log of Llama-3.1-8B -> vllm serve {m}",
                            oracle=refused_or_assumed))
            out.append(Case("from-log", ["plan", "--json", "--no-fixes", "--from-log", str(log), "--", *SGL, m],
                            f"vLLM log -> sglang {m}", must_fail=True))
        out.append(Case("from-log", ["plan", "--json", "--no-fixes", "--from-log", str(renamed), "--", *SGL, m],
                        f"SGLang log of Llama-3.1-8B (named) -> sglang {m}", must_fail=True))
        out.append(Case("from-log", ["plan", "--json", "--no-fixes", "--from-log", str(renamed), "--", "vllm", "serve",
                                     m], f"SGLang log -> vllm {m}", must_fail=True))

    def on_log_gpu(res: Result) -> str | None:
        d = _json(res)
        if d is None:
            return f"no plan JSON: {res.stdout[:160]!r}"
        total = (d.get("budget") or {}).get("total_gib")
        return None if total is not None and abs(total - 23.58) < 0.01 else f"planned on {total} GiB, not the log's"
    for extra in ([], ["--max-model-len", "20000"], ["--max-model-len", "8192"], ["--gpu-memory-utilization", "0.8"]):
        out.append(Case("from-log", ["plan", "--json", "--no-fixes", "--from-log", str(VLLM_V0_LOG), "--", "vllm",
                                     "serve", "meta-llama/Llama-3.1-8B-Instruct", *extra],
                        f"the same model from the V0 log {extra}", oracle=on_log_gpu))
    for tp in ("1", "2"):
        out.append(Case("from-log", ["plan", "--json", "--no-fixes", "--from-log", str(renamed), "--", *SGL,
                                     "meta-llama/Llama-3.1-8B-Instruct", "--tp", tp], f"the same model, TP {tp}",
                        oracle=_plan_says("ok")))
    return out


def _awq_folder(tmp: Path) -> Path:
    cfg = json.loads((CONFIGS / "Qwen__Qwen3-8B.json").read_text(encoding="utf-8"))
    cfg["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True,
                                  "version": "gemm"}
    folder = tmp / "Qwen3-8B-AWQ"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg), encoding="utf-8")
    return folder


def _vllm_quant(tmp: Path) -> list[Case]:
    out: list[Case] = []
    needs_file = ("awq", "auto_awq", "awq_marlin", "gptq", "auto_gptq", "gptq_marlin", "moe_wna16", "modelopt",
                  "modelopt_fp4", "inc")
    for q in needs_file:
        out.append(Case("vllm-quant", _plan("vllm", "serve", "Qwen/Qwen3-8B", "--quantization", q),
                        f"bf16 + --quantization {q}", oracle=_plan_says("fails", "Cannot find the config file",
                                                                        kind="start_check")))
    for q in ("magic", "int3", "nf5", "fp6", "marlinx"):
        out.append(Case("vllm-quant", _plan("vllm", "serve", "Qwen/Qwen3-8B", "--quantization", q),
                        f"bf16 + unknown --quantization {q}",
                        oracle=_plan_says("fails", "Unknown quantization method", kind="start_check")))
    for q in ("compressed-tensors", "quark"):
        out.append(Case("vllm-quant", _plan("vllm", "serve", "Qwen/Qwen3-8B", "--quantization", q),
                        f"bf16 + --quantization {q}", oracle=_plan_says("fails", "TypeError", kind="start_check")))
    for q in ("fbgemm_fp8", "fp_quant"):
        out.append(Case("vllm-quant", _plan("vllm", "serve", "Qwen/Qwen3-8B", "--quantization", q),
                        f"bf16 + deprecated {q}", oracle=_plan_says("fails", "deprecated", kind="start_check")))
    awq = _awq_folder(tmp)
    for q in ("awq", "awq_marlin", "auto_awq", "marlin", "moe_wna16"):
        out.append(Case("vllm-quant", _plan("vllm", "serve", str(awq), "--quantization", q),
                        f"AWQ checkpoint + {q}", oracle=_plan_says("ok")))
    for q in ("fp8", "gptq", "gptq_marlin", "modelopt", "compressed-tensors", "mxfp4"):
        out.append(Case("vllm-quant", _plan("vllm", "serve", str(awq), "--quantization", q),
                        f"AWQ checkpoint + {q}", oracle=_plan_says("fails", "(awq) does not match", f"({q})")))
    return out


def _spec_configs() -> list[Case]:
    out: list[Case] = []
    for method in ("eagle", "eagle3", "draft_model", "medusa", "dflash"):
        spec = json.dumps({"method": method, "num_speculative_tokens": 3})
        out.append(Case("vllm-spec", _plan("vllm", "serve", "Qwen/Qwen3-8B", "--speculative-config", spec),
                        f"{method} without a draft model",
                        oracle=_plan_says("fails", "without speculative model")))
    for k in (2.5, "3.5", 0, -1, True, None, "three", [3]):
        spec = json.dumps({"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 4})
        out.append(Case("vllm-spec", _plan("vllm", "serve", "Qwen/Qwen3-8B", "--speculative-config", spec),
                        f"num_speculative_tokens {k!r}", must_fail=True))
    for spec in ({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4},
                 {"method": "suffix", "num_speculative_tokens": 4}, {"method": "ngram", "num_speculative_tokens": "3",
                                                                      "prompt_lookup_max": 4}):
        out.append(Case("vllm-spec", _plan("vllm", "serve", "Qwen/Qwen3-8B", "--speculative-config",
                                           json.dumps(spec)), f"model-free {spec['method']}",
                        oracle=_plan_says("ok")))
    return out


def _versions() -> list[Case]:
    out: list[Case] = []
    for v in ("0.4.0", "0.3.9", "0.5.0", "0.5.11", "0.4.10.post2"):
        out.append(Case("version", _plan(*SGL, "Qwen/Qwen3-8B", extra=("--engine-version", v)), f"SGLang {v}",
                        oracle=_plan_says("ok", warning="older than the oldest release")))
    for v in ("0.4.0", "0.5.4", "0.2.7"):
        out.append(Case("version", _plan("vllm", "serve", "Qwen/Qwen3-8B", extra=("--engine-version", v)),
                        f"vLLM {v}", oracle=_plan_says("ok", warning="older than the oldest release")))
    for v in ("0.5.15.post1", "0.5.12.post1", "0.5.23"):
        out.append(Case("version", _plan(*SGL, "Qwen/Qwen3-8B", extra=("--engine-version", v)),
                        f"SGLang {v} (read)", oracle=_no_warning("older than the oldest release")))
    for v in ("banana", "9.9", "v", "0", "1.x"):
        for head in ((*SGL, "Qwen/Qwen3-8B"), ("vllm", "serve", "Qwen/Qwen3-8B")):
            out.append(Case("version", _plan(*head, extra=("--engine-version", v)),
                            f"--engine-version {v} ({head[0]})", must_fail=True))
    return out


def _assumed_or_own(res: Result) -> str | None:
    """A stand-in's synthesized quantization: never the verdict (ok, with the warning); a checkpoint bundled with
    its own config (no stand-in): its mismatch is SGLang's / vLLM's failure."""
    d = _json(res)
    if d is None:
        return f"no plan JSON: {res.stdout[:160]!r}"
    if d.get("model_stand_in"):
        return _plan_says("ok", warning="not decided")(res)
    return _plan_says("fails", "does not match")(res)


def _standins() -> list[Case]:
    out: list[Case] = []
    for name, q in (("amd/Qwen3-8B-MXFP4", "quark"), ("Qwen/Qwen3-8B-FP8", "awq"), ("Qwen/Qwen3-8B-AWQ", "fp8"),
                    ("Qwen/Qwen3-32B-FP8", "gptq"), ("Qwen/Qwen3-8B-GPTQ-Int4", "fp8"),
                    ("nvidia/Qwen3-8B-NVFP4", "awq")):
        out.append(Case("stand-in", _plan(*SGL, name, "--quantization", q, gpu="H200"),
                        f"sglang {name} --quantization {q}", oracle=_assumed_or_own))
        out.append(Case("stand-in", _plan("vllm", "serve", name, "--quantization", q, gpu="H200"),
                        f"vllm {name} --quantization {q}", oracle=_assumed_or_own))
    return out


def _fp8_sm8x() -> list[Case]:
    out: list[Case] = []
    moe = ("vllm", "serve", "Qwen/Qwen3-Coder-30B-A3B-Instruct-FP8", "--enable-expert-parallel",
           "--tensor-parallel-size", "8")
    for gpu in ("RTX 3090", "A100 80GB", "A100 40GB"):
        out.append(Case("fp8-sm8x", _plan("vllm", "serve", "Qwen/Qwen3-8B-FP8", gpu=gpu), f"dense FP8 on {gpu}",
                        oracle=_plan_says("ok", warning="no FP8 tensor cores")))
        out.append(Case("fp8-sm8x", _plan("vllm", "serve", "Qwen/Qwen3-8B", "--quantization", "fp8", gpu=gpu),
                        f"online FP8 on {gpu}", oracle=_plan_says("ok", warning="no FP8 tensor cores")))
    for gpu in ("H100 80GB", "H200", "L40S", "RTX 4090", "B200"):
        out.append(Case("fp8-sm8x", _plan("vllm", "serve", "Qwen/Qwen3-8B-FP8", gpu=gpu), f"dense FP8 on {gpu}",
                        oracle=_no_warning("no FP8 tensor cores")))
    out.append(Case("fp8-sm8x", _plan(*moe, "--gpu-memory-utilization", "0.85", gpu="RTX 3090",
                                      extra=("--engine-version", "0.10.0")), "vllm#22177 at 0.85",
                    oracle=_plan_says("fails", "vllm#22177", kind="fp8_marlin_oom")))
    out.append(Case("fp8-sm8x", _plan(*moe, "--gpu-memory-utilization", "0.7", gpu="RTX 3090",
                                      extra=("--engine-version", "0.10.0")), "vllm#22177 at 0.7",
                    oracle=_plan_says("ok", warning="outside the KV budget")))
    return out


def _usage() -> list[Case]:
    out: list[Case] = []
    for argv in (["plna"], ["pln", "--json"], ["repot", "x"], ["plan", "--jsn", "--", "vllm", "serve", "m"],
                 ["run", "--bogus", "m.toml"], ["report"], ["models", "bild"], ["--bogus"], ["doctor"],
                 ["predict"], ["calibrate"], ["plan", "--gpu-mem-gib", "abc", "--", "vllm", "serve", "m"],
                 ["plan", "--gpu-mem-gib", "-5", "--", "vllm", "serve", "m"], ["compare"], ["export"],
                 ["plan", "--engine", "sglng", "--", "vllm", "serve", "m"]):
        out.append(Case("usage", argv, f"specbench {' '.join(argv)}", must_fail=True))
    return out


def cases(tmp: Path) -> list[Case]:
    return [*_from_log(tmp), *_vllm_quant(tmp), *_spec_configs(), *_versions(), *_standins(), *_fp8_sm8x(),
            *_usage()]


def run(case: Case) -> tuple[str, str, Result]:
    """harness.run_case offline, with an empty HF cache: the planner's bundled configs only."""
    home = Path(os.environ.get("TMPDIR", "/tmp")) / "specbench-fuzz-empty-hf"
    home.mkdir(exist_ok=True)
    with environment({"HF_HUB_OFFLINE": "1", "HF_HOME": str(home), "HF_HUB_CACHE": None}):
        return run_case(case)
