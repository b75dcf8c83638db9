"""A stand-in's artifact named, not measured as a result: a dummy-weight MoE under SGLang's simulated acceptance below
2 (fixed token mode) puts every request on one draft chain, so its verify routes the batch like one request
(engines/sglang/simulate.py::collapsed_routing, read in SGLang 0.5.15.post1). The launch says so (a note in the dry
run), the predictor keeps those cells out of its calibration and its accuracy (predict/observe.py::fitted), and
SGLang's own uniform expert routing lifts it. The real stores: the H100 and H200 MoE stores' accept-1.5 cells are the
ones whose step was 25-30 % shorter than at 2.5 for c >= 4."""

from __future__ import annotations

from paths import DATA
from specbench.contracts_inputs import LaunchTarget
from specbench.engines.argv import split_command
from specbench.engines.base import server_adapter
from specbench.engines.sglang.simulate import collapsed_routing
from specbench.predict.observe import fitted, observations

DUMMY = split_command("python3 -m sglang.launch_server --model-path /m --load-format dummy --skip-tokenizer-init "
                      "--speculative-algorithm EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 1 "
                      "--speculative-num-draft-tokens 4")
SIM = {"SGLANG_SIMULATE_ACC_LEN": "1.5", "SGLANG_SIMULATE_ACC_METHOD": "match-expected"}


def test_the_rule_holds_only_where_the_engine_collapses_the_routing() -> None:
    said = collapsed_routing(DUMMY, SIM)
    assert said and "SGLANG_SIMULATE_UNIFORM_EXPERTS=1" in said and "1.5" in said
    assert collapsed_routing(split_command("x --load-format=dummy"), SIM)  # the = spelling
    assert collapsed_routing(DUMMY, {**SIM, "SGLANG_SIMULATE_ACC_LEN": "2.5"}) is None  # no round drawn at 1
    assert collapsed_routing(DUMMY, {}) is None  # no simulation: the drafter's own tokens
    assert collapsed_routing([w for w in DUMMY if w not in ("--load-format", "dummy")], SIM) is None  # real weights
    assert collapsed_routing(DUMMY, {**SIM, "SGLANG_SIMULATE_UNIFORM_EXPERTS": "1"}) is None
    assert collapsed_routing(DUMMY, {**SIM, "SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS": "true"}) is None
    assert collapsed_routing(DUMMY, {**SIM, "SGLANG_SIMULATE_UNIFORM_EXPERTS": "Y"}) is None  # EnvBool's spellings
    assert collapsed_routing(DUMMY, {**SIM, "SGLANG_SIMULATE_UNIFORM_EXPERTS": "0"})  # set, but off
    assert collapsed_routing(DUMMY, {**SIM, "SGLANG_SIMULATE_ACC_TOKEN_MODE": "real-draft-token"}) is None
    assert collapsed_routing(DUMMY, {**SIM, "SGLANG_SIMULATE_ACC_LEN": "abc"}) is None


def test_the_launch_says_it_and_the_adapter_answers_from_the_settings() -> None:
    sg = server_adapter("sglang", "0.5.15.post1")
    target = LaunchTarget(command=tuple(DUMMY[:8]))  # the base command, the speculative flags come from settings
    settings: dict[str, object] = {"tp": 1, "algorithm": "EAGLE3", "num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4,
                                   "simulated_accept_len": 1.5, "env": {"NCCL_NVLS_ENABLE": "0"}}
    launch = sg.launch(target, settings)
    assert any("every request drafts one shared chain" in n for n in launch.notes)
    assert sg.stand_in_measurement(launch.argv, settings) is not None
    uniform = {**settings, "env": {"SGLANG_SIMULATE_UNIFORM_EXPERTS": "1"}}
    assert not any("shared chain" in n for n in sg.launch(target, uniform).notes)
    assert sg.stand_in_measurement(launch.argv, uniform) is None
    assert sg.stand_in_measurement(launch.argv, {**settings, "simulated_accept_len": 2.5}) is None
    assert server_adapter("vllm", None).stand_in_measurement(launch.argv, settings) is None  # nothing known there


def test_the_predictor_keeps_the_moe_stores_collapsed_cells_out() -> None:
    for store in ("h100-moe-sglang-0.5.15.post1/h100-moe.db", "h200-moe-sglang-0.5.15.post1/h200-moe.db"):
        obs = observations(str(DATA / store))
        assert sorted((o.label, o.shape.concurrency) for o in obs if o.stand_in) == [
            ("eagle3-sim1.5", c) for c in (1, 4, 16, 32)]
        assert len(fitted(obs)) == len(obs) - 4
    dense = observations(str(DATA / "h200-dense8b-sglang-0.5.15.post1" / "h200-dense8b.db"))
    assert any(o.label == "eagle3-sim1.5" for o in dense) and not any(o.stand_in for o in dense)  # no routing to move


def test_the_report_marks_those_cells_and_says_why_once() -> None:
    from specbench.report.predicted import html_lines, markdown_lines, predicted_section

    section = predicted_section([str(DATA / "h100-moe-sglang-0.5.15.post1" / "h100-moe.db")])
    marked = [r for r in section.rows if r.stand_in]
    assert sorted(r.concurrency for r in marked) == [1, 4, 16, 32] and {r.label for r in marked} == {"eagle3-sim1.5"}
    md = "\n".join(markdown_lines(section))
    assert md.count("a stand-in's artifact: not judged") == 4
    assert md.count("A stand-in's artifact (4 cells): dummy weights under simulated accept 1.5") == 1
    assert "A stand-in's artifact (4 cells)" in "\n".join(html_lines(section))


def test_each_such_cell_says_so_in_its_row_of_the_report() -> None:
    from specbench.report.tables import cell_rows
    from specbench.stored.read import load_store

    moe = load_store(str(DATA / "h100-moe-sglang-0.5.15.post1" / "h100-moe.db"))
    said = {(c.label, c.concurrency) for c, row in cell_rows([moe]) if "a stand-in's artifact" in row.note}
    assert said == {("eagle3-sim1.5", c) for c in (1, 4, 16, 32)}
    dense = load_store(str(DATA / "h200-dense8b-sglang-0.5.15.post1" / "h200-dense8b.db"))
    assert not any("a stand-in's artifact" in row.note for _, row in cell_rows([dense]))


def test_a_decision_names_such_a_cell_with_its_warning() -> None:
    """The decision at each concurrency ranks the artifact cell like any other, with the warning beside its name
    (decide/question.py::Arm.warnings) and in the integrity table's row. In the real store the accept-1.5 cells never
    lead (sim 3.5 does), so the store's sim-3.5 cells are taken out: then they lead against AR, and the answer names
    them with the warning."""
    from specbench.report.cellrows import STAND_IN_WARNING
    from specbench.report.decision_tables import answer_tables
    from specbench.report.decisions import questions
    from specbench.report.integrity_tables import integrity_rows
    from specbench.report.tables import cell_rows
    from specbench.stored.read import load_store

    moe = load_store(str(DATA / "h100-moe-sglang-0.5.15.post1" / "h100-moe.db"))
    pairs = cell_rows([moe])
    qs = questions(pairs)
    warned = {(r.label, r.concurrency) for q in qs for r in q.rows if STAND_IN_WARNING in r.warnings}
    assert warned == {("eagle3-sim1.5", c) for c in (1, 4, 16, 32)}
    table = integrity_rows([row for _, row in pairs])
    assert sum(STAND_IN_WARNING in r[-1] for r in table) == 4 and all(
        (STAND_IN_WARNING in r[-1]) == r[0].startswith("eagle3-sim1.5") for r in table)
    only = questions([(c, r) for c, r in pairs if c.label in ("ar", "eagle3-sim1.5")])
    led = [q for q in only if q.decision.standings[0].arm.name.startswith("eagle3-sim1.5")]
    assert led, "accept 1.5 on a MoE leads AR somewhere (the artifact makes it cheap)"
    answers = [row for t in answer_tables(only) for row in t.rows]
    assert any(STAND_IN_WARNING in cell for row in answers for cell in row)


def test_the_routing_regime_follows_the_weights_and_the_expert_simulation() -> None:
    """Dummy weights under the simulated acceptance's fixed token mode route a MoE verify's positions onto shared
    experts (the predictor's token-id share); real weights, SGLang's uniform / round-robin expert simulation, the
    real-draft-token mode and no simulated acceptance at all are taken as each token routed on its own."""
    sg = server_adapter("sglang", "0.5.15.post1")
    real = [w for w in DUMMY if w not in ("--load-format", "dummy")]
    assert sg.stand_in_routing(DUMMY, {"simulated_accept_len": 2.5})
    assert not sg.stand_in_routing(DUMMY, {})  # no simulated acceptance: the dummy model's own tokens
    real_tokens = {"simulated_accept_len": 2.5, "env": {"SGLANG_SIMULATE_ACC_TOKEN_MODE": "real-draft-token"}}
    assert not sg.stand_in_routing(DUMMY, real_tokens)
    assert not sg.stand_in_routing(real, {"simulated_accept_len": 2.5})
    sim = {"simulated_accept_len": 2.5}
    assert not sg.stand_in_routing(DUMMY, {**sim, "env": {"SGLANG_SIMULATE_UNIFORM_EXPERTS": "1"}})
    assert not sg.stand_in_routing(DUMMY, {**sim, "env": {"SGLANG_SIMULATE_ROUND_ROBIN_EXPERTS": "yes"}})
    assert sg.stand_in_routing(DUMMY, {**sim, "env": {"SGLANG_SIMULATE_UNIFORM_EXPERTS": "0"}})  # set, but off
    assert not server_adapter("vllm", None).stand_in_routing(DUMMY, {})  # nothing known there: its own routing


def test_the_stores_carry_their_routing_regime() -> None:
    regimes = {store: {o.shape.routing for o in observations(str(DATA / store)) if o.accept_len is not None}
               for store in ("h100-moe-sglang-0.5.15.post1/h100-moe.db",
                             "h100-moe-uniform-sglang-0.5.15.post1/h100-moeu.db",
                             "h200-dense8b-sglang-0.5.15.post1/h200-dense8b.db")}
    assert regimes == {"h100-moe-sglang-0.5.15.post1/h100-moe.db": {"token-id"},
                       "h100-moe-uniform-sglang-0.5.15.post1/h100-moeu.db": {"independent"},
                       "h200-dense8b-sglang-0.5.15.post1/h200-dense8b.db": {"independent"}}  # dense: no routing
