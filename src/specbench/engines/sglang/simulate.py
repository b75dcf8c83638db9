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

import functools
from collections.abc import Mapping, Sequence

from specbench.engines.simulate import SimulatedAcceptance, check_range
from specbench.engines.versions import parse_release

_APPLIES = frozenset({"EAGLE", "EAGLE3", "NEXTN", "MTP", "NGRAM", "STANDALONE"})
_SOURCE = {(0, 5, 15): "sglang/srt/speculative/eagle_utils.py::eagle_sample@0.5.15",
           (0, 5, 12): "sglang/srt/speculative/eagle_info.py::EagleVerifyInput.verify@0.5.12"}


def simulated_acceptance(accept_len: float, argv: list[str], version: str | None) -> SimulatedAcceptance:
    """The switch for the server `argv` launches (its algorithm and draft depth as SGLang reads them)."""
    algorithm, steps, draft = _spec_shape(tuple(argv), version)
    release = parse_release(version) if version else None
    src = _SOURCE[(0, 5, 12)] if release is not None and release < (0, 5, 13) else _SOURCE[(0, 5, 15)]
    if algorithm == "AR":
        return SimulatedAcceptance(accept_len, refusal="an autoregressive server has no verify step to simulate")
    if algorithm not in _APPLIES:
        return SimulatedAcceptance(
            accept_len, source=src,
            refusal=(f"SGLang {version or '0.5.15'} applies SGLANG_SIMULATE_ACC_LEN only in the EAGLE-family and "
                     f"NGRAM verify ({src}); {algorithm} verifies without it"))
    most = (draft if algorithm == "NGRAM" else (steps + 1 if steps else draft))
    refusal = check_range(accept_len, most, f"SGLang {algorithm}")
    env = {"SGLANG_SIMULATE_ACC_LEN": repr(float(accept_len)), "SGLANG_SIMULATE_ACC_METHOD": "match-expected"}
    return SimulatedAcceptance(accept_len, env=env, source=src, refusal=refusal)


_EXPERT_SIMULATION = ("SGLANG_SIMULATE_UNIFORM_EXPERTS", "SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS")


# sglang/srt/environ.py::EnvBool.parse@0.5.15.post1: the values SGLang reads as true (case-insensitive)
_ENV_TRUE = ("true", "1", "yes", "y")


# One parse per launch, not per cell: a matrix's cells share their server's argv (a 500-cell `predict` parsed ~940
# times; benchmarks/RESULTS.md seventh session). Keyed by the argv as a tuple and the release; the answers are
# plain values.
@functools.lru_cache(maxsize=256)
def _spec_shape(argv: tuple[str, ...], version: str | None) -> tuple[str, int | None, int | None]:
    """(the algorithm SGLang reads, AR when none; --speculative-num-steps; --speculative-num-draft-tokens)."""
    from specbench.engines.sglang.args import parse_sglang_argv

    args = parse_sglang_argv(list(argv), version)
    return args.spec_algorithm or "AR", args.speculative_num_steps, args.speculative_num_draft_tokens


def _dummy_weights(argv: Sequence[str]) -> bool:
    """`--load-format dummy`, as the release's own parser reads the launch (engines/sglang/args.py)."""
    return _loads_dummy(tuple(argv))


@functools.lru_cache(maxsize=256)
def _loads_dummy(argv: tuple[str, ...]) -> bool:
    from specbench.engines.sglang.args import parse_sglang_argv
    from specbench.errors import UserError

    try:
        return parse_sglang_argv(list(argv), None).load_format == "dummy"
    except (UserError, ValueError):  # a launch the parser refuses is planned (and refused) elsewhere
        return False


def routes_by_token_id(argv: Sequence[str], env: Mapping[str, str]) -> bool:
    """Whether the verify of a MoE target of this launch routes its requests' positions onto shared experts, the
    regime the dummy-weight MoE stores measured: dummy weights, which route a token by its id alone
    (model_loader/weight_utils.py::initialize_dummy_weights@0.5.15.post1); the simulated acceptance in its fixed token
    mode, which commits one token id for every request (speculative/spec_utils.py::generate_simulated_accept_index);
    and neither expert-routing simulation (layers/moe/topk.py::select_experts: SGLANG_SIMULATE_UNIFORM_EXPERTS /
    _ROUND_ROBIN_EXPERTS). Dummy weights without the simulated acceptance generate their own, differing tokens: not
    measured, taken as each token routed on its own."""
    try:
        accept = float(env.get("SGLANG_SIMULATE_ACC_LEN", "-1"))
    except ValueError:
        return False
    if accept < 1.0 or env.get("SGLANG_SIMULATE_ACC_TOKEN_MODE", "fixed") != "fixed":
        return False
    if any(env.get(k, "").strip().lower() in _ENV_TRUE for k in _EXPERT_SIMULATION):
        return False
    return _dummy_weights(argv)


def collapsed_routing(argv: Sequence[str], env: Mapping[str, str]) -> str | None:
    """What a dummy-weight launch under simulated acceptance below 2 measures that no real model does, on a target
    with routed experts (MoE); None when that does not hold. Read in SGLang 0.5.15.post1:
    - dummy weights route a token by its id alone (model_loader/weight_utils.py::initialize_dummy_weights: one uniform
      init per parameter, the same in every layer);
    - the fixed token mode (SGLANG_SIMULATE_ACC_TOKEN_MODE, default "fixed") commits token 100 for every request
      (speculative/spec_utils.py::generate_simulated_accept_index: `predict.fill_(100)`), and one accept length is
      drawn per round for the whole batch (spec_utils.py::_sample_simulated_acc_len);
    - the next draft reads the verify position accept_len - 1 (eagle_worker_v2.py::EagleDraftWorker.
      _draft_extend_for_decode): a round drawn at 1 puts every request on one draft chain for good, so a verify of
      b requests touches the experts of ~2 tokens (fused_moe_kernel loads only the routed experts);
    - layers/moe/topk.py::select_experts: SGLANG_SIMULATE_UNIFORM_EXPERTS / _ROUND_ROBIN_EXPERTS replace the routing
      ("to avoid expert imbalance from dummy/random weights"), which ends the collapse.
    Measured: the MoE stores' step at accept 1.5 is 25-30 % shorter than at 2.5 for c >= 4, flat at c = 1."""
    try:
        accept = float(env.get("SGLANG_SIMULATE_ACC_LEN", "-1"))
    except ValueError:
        return None
    if not (1.0 <= accept < 2.0) or not routes_by_token_id(argv, env):
        return None
    return (f"dummy weights under simulated accept {accept:g} (< 2, fixed token mode): on a MoE target every request "
            "drafts one shared chain, so a verify routes the batch like one request and its expert reads are too "
            "small (speculative/spec_utils.py::generate_simulated_accept_index@0.5.15.post1); set "
            "SGLANG_SIMULATE_UNIFORM_EXPERTS=1 in [server] env for MoE routing that a real model's resembles")
