"""SGLang's simulated acceptance: `SGLANG_SIMULATE_ACC_LEN` (a float mean accept length; off when < 0) and
`SGLANG_SIMULATE_ACC_METHOD` (`match-expected`: each verify accepts floor(L) or ceil(L) tokens with the weights that
make the mean L; `multinomial`: a normal around L, which does not match the mean), read once at import
(sglang/srt/environ.py::Envs.SGLANG_SIMULATE_ACC_LEN@0.5.15; spec_utils.py::_sample_simulated_acc_len@0.5.15).

Where it is applied, by release (read in the wheels):
- 0.5.15: `sglang/srt/speculative/eagle_utils.py::eagle_sample`, the verify of `eagle_worker_v2` (EAGLE, EAGLE3,
  NEXTN), `multi_layer_eagle_worker_v2` and `ngram_worker` (NGRAM). DFLASH verifies in `dflash_info*.py` /
  `dflash_worker_v2.py`, which never read it.
- 0.5.12: `sglang/srt/speculative/eagle_info.py::EagleVerifyInput.verify` (EAGLE family, and NGRAM through it);
  DFLASH's own verify never reads it.
The accepted length is clamped to [1, spec_steps + 1] (`generate_simulated_accept_index`), spec_steps being the
draft depth (EAGLE topk 1: `--speculative-num-steps`; NGRAM: draft tokens - 1).
"""

from __future__ import annotations

from specbench.engines.simulate import SimulatedAcceptance, check_range
from specbench.engines.versions import parse_release

_APPLIES = frozenset({"EAGLE", "EAGLE3", "NEXTN", "MTP", "NGRAM", "STANDALONE"})
_SOURCE = {(0, 5, 15): "sglang/srt/speculative/eagle_utils.py::eagle_sample@0.5.15",
           (0, 5, 12): "sglang/srt/speculative/eagle_info.py::EagleVerifyInput.verify@0.5.12"}


def simulated_acceptance(accept_len: float, argv: list[str], version: str | None) -> SimulatedAcceptance:
    """The switch for the server `argv` launches (its algorithm and draft depth as SGLang reads them)."""
    from specbench.engines.sglang.args import parse_sglang_argv

    args = parse_sglang_argv(list(argv), version)
    algorithm = args.spec_algorithm or "AR"
    release = parse_release(version) if version else None
    src = _SOURCE[(0, 5, 12)] if release is not None and release < (0, 5, 13) else _SOURCE[(0, 5, 15)]
    if algorithm == "AR":
        return SimulatedAcceptance(accept_len, refusal="an autoregressive server has no verify step to simulate")
    if algorithm not in _APPLIES:
        return SimulatedAcceptance(
            accept_len, source=src,
            refusal=(f"SGLang {version or '0.5.15'} applies SGLANG_SIMULATE_ACC_LEN only in the EAGLE-family and "
                     f"NGRAM verify ({src}); {algorithm} verifies without it"))
    steps, draft = args.speculative_num_steps, args.speculative_num_draft_tokens
    most = (draft if algorithm == "NGRAM" else (steps + 1 if steps else draft))
    refusal = check_range(accept_len, most, f"SGLang {algorithm}")
    env = {"SGLANG_SIMULATE_ACC_LEN": repr(float(accept_len)), "SGLANG_SIMULATE_ACC_METHOD": "match-expected"}
    return SimulatedAcceptance(accept_len, env=env, source=src, refusal=refusal)
