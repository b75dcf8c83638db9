"""vLLM's simulated acceptance: synthetic rejection sampling, `--speculative-config` keys
`rejection_sample_method: "synthetic"` and `synthetic_acceptance_length: L` (L in [1, num_speculative_tokens + 1],
resolved to per-position rates by the minimum-variance schedule), applied in the V1 rejection sampler for every
speculative method (vllm/config/speculative.py::SpeculativeConfig._resolve_synthetic_acceptance_rates@0.32.0,
vllm/v1/sample/rejection_sampler.py::RejectionSampler.__init__@0.32.0). Releases before 0.32.0 are not read here:
they are refused rather than guessed. The CPU build's rejection kernel asserts `not SYNTHETIC_MODE` (measured on the
embedded engine, 2026-12-01: the server dies at its first verify), so a CPU server is refused too.
"""

from __future__ import annotations

from specbench.engines.simulate import SimulatedAcceptance, check_range
from specbench.engines.versions import parse_release

SOURCE = "vllm/config/speculative.py::SpeculativeConfig.synthetic_acceptance_length@0.32.0"
CPU_SOURCE = "vllm/utils/cpu_triton_utils.py::_rejection_greedy_sample_kernel_impl@0.32.0"


def simulated_acceptance(accept_len: float, argv: list[str], version: str | None) -> SimulatedAcceptance:
    """The keys for the server `argv` launches (its `--speculative-config` as vLLM reads it)."""
    from specbench.engines.vllm.args import parse_vllm_argv
    from specbench.engines.vllm.plan import detect_device

    args = parse_vllm_argv(list(argv))
    spec = args.speculative
    if spec is None:
        return SimulatedAcceptance(accept_len, refusal="an autoregressive server has no verify step to simulate")
    release = parse_release(version) if version else None
    if release is not None and release < (0, 32, 0):
        return SimulatedAcceptance(accept_len, source=SOURCE, refusal=(
            f"vLLM {version}: synthetic rejection sampling is read here from 0.32.0 on ({SOURCE})"))
    if detect_device(args, None) == "cpu":
        return SimulatedAcceptance(accept_len, source=CPU_SOURCE, refusal=(
            "vLLM's CPU build refuses synthetic acceptance at its first verify ('Synthetic acceptance not supported "
            f"with CPU sampling', {CPU_SOURCE}; seen on the embedded engine)"))
    k = spec.num_speculative_tokens
    refusal = check_range(accept_len, k + 1 if k else None, "vLLM's rejection sampler")
    return SimulatedAcceptance(accept_len, speculative_config={"rejection_sample_method": "synthetic",
                                                               "synthetic_acceptance_length": float(accept_len)},
                               source=SOURCE, refusal=refusal)
