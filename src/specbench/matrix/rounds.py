"""Repeats on later boots: the waves of `repeat_across_boots` and the rounds of `repeats = {min, max}`.

Waves (`[client] repeat_across_boots = true`): every repeat of a cell runs on a boot of its own. Wave r boots each
server of a phase in the matrix's order, runs repeat r of each of its unfinished cells and stops it (A-B-A-B), until
every cell has its `min` repeats; phases stay barriers. A packed run (`--gpus`) or a Ray run starts a wave's servers
at once, each on its own GPUs, as it does a phase's: each repeat still has a boot of its own.

Rounds (`repeats = {min, max}` or "auto"): once every cell has its planned repeats, the done cells are grouped into
questions exactly as the speedups are (`question_key`: the model and load/speedup.py::baseline_key), each question is
decided (decide/question.py::decide on each cell's pooled estimates, lead load/speedup.py::lead_of, looks
decide.looks_of) and every cell of `Decision.open_idents()` (the open ones and their question's best) that has fewer
than `max` repeats gets one more: each round boots each server with such a cell once, runs one more repeat of each,
stops it. The repeat is merged into the cell (matrix/repeat_metrics.py: its metrics are those of all its repeats as if
they had run in one go; its status too: a repeat whose server died or whose requests failed beyond
`max_failed_fraction` makes the cell `failed` / `partial` as it would have in one run, every row kept), and the next
round is decided on the new numbers, until no question is open or its cells are at `max`.

Resume: a round's plan (its number, each cell's target count of repeats, why) is in the store's meta (`repeat_round`)
before its first boot; a run stopped mid-round finishes that round's remaining repeats first, and each finished
repeat is in the store (matrix/store_rows.py), so none is lost and none run again. A cell whose round repeat could
not run (its server did not boot) gets no more rounds in this run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from specbench.decide import Decision, Metric, arm_of, decide, looks_of
from specbench.load import speedup as speedups
from specbench.matrix.expansion import Cell, ServerTuple
from specbench.matrix.visits import Visit, policy_of

Key = tuple[Any, ...]
ROUND_META = "repeat_round"  # the round under way: {"round", "targets": {cell: repeats}, "reasons": {cell: why}}
ROUNDS_DONE_META = "repeat_rounds_done"  # the number of the last finished round
Work = list[tuple[ServerTuple, list[Cell]]]
Execute = Callable[[Work], None]


def question_rows(store: Any) -> list[dict[str, Any]]:
    """Every done cell with metrics, with the model its server was launched with (`model`): a cell of one model is
    never compared with a cell of another."""
    from specbench.matrix.adapters import command_model

    models = {s["server_id"]: command_model(s.get("command") or []) for s in store.servers()}
    return [{**r, "model": models.get(r.get("server_id"))} for r in store.cells()
            if r.get("status") == "done" and r.get("metrics")]


def question_key(row: Mapping[str, Any]) -> Key:
    """(model, TP, concurrency, workload...): the cells one question compares, as fill_speedups pairs them."""
    c = row.get("client") or {}
    return (row.get("model"), *speedups.baseline_key(row.get("tp"), c.get("concurrency"), c))


def decisions(rows: Iterable[Mapping[str, Any]]) -> list[tuple[list[Mapping[str, Any]], Decision]]:
    """Each question of two or more done cells with its decision (arms named by label, ident = cell id)."""
    groups: dict[Key, list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(question_key(r), []).append(r)
    out = []
    for group in groups.values():
        if len(group) < 2:
            continue
        arms = [arm_of(str(r.get("label")), r["metrics"], is_ar=speedups.is_ar(r.get("algorithm"), r.get("label")),
                       ident=str(r["cell_id"])) for r in group]
        client = group[0].get("client") or {}
        looks = max(looks_of(r.get("client") or {}) for r in group)
        lead: Metric = "tpot" if speedups.lead_of(client) == "tpot" else "throughput"
        out.append((group, decide(arms, lead, looks=looks)))
    return out


def why_open(d: Decision, ident: str) -> str:
    """'undecided against ar on throughput: 0.981x [0.852, 1.129] at 99.29%; about 3 more repeats each would
    decide' / 'the best on throughput, against spec3 (undecided)'."""
    from specbench.decide import METRICS, more_text

    name = METRICS[d.lead][2]
    best = d.best(d.lead)
    for s in d.standings:
        if s.arm.ident != ident:
            continue
        c = s.vs_best.get(d.lead)
        if c is None:
            others = [o.arm.name for o in d.standings if (oc := o.vs_best.get(d.lead)) is not None and not oc.decided]
            return f"the best on {name}, against {', '.join(others)} (undecided)"
        ci = f" [{c.ci[0]:.3f}, {c.ci[1]:.3f}]" if c.ci is not None else ""
        more = more_text(c)
        return (f"{c.verdict} against {best.arm.name if best else '?'} on {name}: {c.ratio:.3f}x{ci} at "
                f"{100 * c.level:.2f}%" + (f"; {more}" if more else ""))
    return "open"


@dataclass(frozen=True)
class RoundPlan:
    round: int
    targets: Mapping[str, int]  # cell id -> the repeats it has stored after the round
    reasons: Mapping[str, str] = field(default_factory=dict)
    questions: int = 0  # open questions

    def as_json(self) -> str:
        return json.dumps({"round": self.round, "targets": dict(self.targets), "reasons": dict(self.reasons),
                           "questions": self.questions})

    @staticmethod
    def from_json(text: str | None) -> RoundPlan | None:
        try:
            d = json.loads(text) if text else None
        except ValueError:
            return None
        if not isinstance(d, dict) or not isinstance(d.get("targets"), dict):
            return None
        return RoundPlan(int(d.get("round") or 1), {str(k): int(v) for k, v in d["targets"].items()},
                         {str(k): str(v) for k, v in (d.get("reasons") or {}).items()}, int(d.get("questions") or 0))


def plan_round(store: Any, cells: Mapping[str, Cell], number: int, given_up: set[str]) -> RoundPlan:
    """The next round: one more repeat for each open cell of the matrix that repeats until decided, is below its
    `max` and has its repeats stored."""
    counts = store.repeat_counts()
    targets: dict[str, int] = {}
    reasons: dict[str, str] = {}
    questions = 0
    for _, d in decisions(question_rows(store)):
        picked = False
        for ident in d.open_idents():
            cell = cells.get(ident)
            if cell is None or ident in given_up:
                continue
            p = policy_of(cell.client)
            n = counts.get(ident, 0)
            if p.max is None or n == 0 or n >= p.max:
                continue
            targets[ident] = n + 1
            reasons[ident] = why_open(d, ident)
            picked = True
        questions += picked
    return RoundPlan(number, targets, reasons, questions)


def planned_visit(store: Any, c: Cell) -> Visit:
    """The planned pass of a cell that needs running: from the start, or (a `running` cell whose run stopped between
    its repeats) on from the repeats it has stored, to its `min`."""
    p = policy_of(c.client)
    if store.cell_status(c.cell_id) == "running":
        prior = tuple(store.stored_repeats(c.cell_id))
        n = len(prior)
        if n and [r.record.repeat for r in prior] == list(range(n)):
            return Visit(start=n, stop=max(n, p.min), slots=p.slots, prior=prior, finish=True, fresh=False)
    return Visit(start=0, stop=p.min, slots=p.slots)


@dataclass
class RoundInfo:
    """What one round did, for the run summary: its number, the open questions, each cell's reason."""

    round: int
    questions: int
    reasons: dict[str, str]
    labels: dict[str, str]
    added: int = 0


class Repeats:
    """The waves and rounds of one run (runner.py calls `run` after the planned pass)."""

    def __init__(self, tuples: Sequence[ServerTuple], cells: Sequence[Cell], store: Any, execute: Execute,
                 report: Any, progress: Any, retry_failed: bool) -> None:
        self.tuples, self.store, self.execute = list(tuples), store, execute
        self.report, self.progress, self.retry_failed = report, progress, retry_failed
        self.cells = {c.cell_id: c for c in cells}
        self.given_up: set[str] = set()

    def run(self) -> None:
        self.waves()
        self.rounds()

    # -- work
    def _work(self, visits: Mapping[str, Visit], phase: int | None = None) -> Work:
        """The tuples (matrix order) with their cells that have a visit, each cell carrying its visit."""
        import dataclasses

        work: Work = []
        for st in self.tuples:
            if phase is not None and st.phase != phase:
                continue
            todo = [dataclasses.replace(c, visit=visits[c.cell_id]) for c in self.cells.values()
                    if c.server_id == st.server_id and c.cell_id in visits]
            if todo:
                work.append((st, todo))
        return work

    # -- waves
    def waves(self) -> None:
        """`repeat_across_boots` cells: one repeat per boot, the servers of each phase interleaved."""
        mine = {cid for cid, c in self.cells.items() if policy_of(c.client).across_boots
                and self.store.needs_run(cid, self.retry_failed)}
        started: set[str] = set()
        order = {cid: i for i, cid in enumerate(self.cells)}
        for phase in sorted({self.cells[cid].phase for cid in mine}):
            while True:
                visits = {}
                for cid in sorted(mine, key=order.__getitem__):
                    c = self.cells[cid]
                    if c.phase != phase:
                        continue
                    v = self._wave_visit(c, fresh_ok=cid not in started)
                    if v is not None:
                        visits[cid] = v
                if not visits:
                    break
                before = self.store.repeat_counts()
                work = self._work(visits, phase)
                self.progress.note(f"wave: repeat {', '.join(sorted({str(v.stop) for v in visits.values()}))} of "
                                   f"{len(visits)} cells, one boot per server (repeat_across_boots)")
                self.progress.more(len(visits))
                started.update(visits)
                self.execute(work)
                after = self.store.repeat_counts()
                if all(after.get(cid, 0) == before.get(cid, 0) for cid in visits) and not any(
                        self.store.cell_status(cid) in ("done", "failed", "partial", "skipped") for cid in visits):
                    break  # nothing moved (a server that never boots): stop rather than loop

    def _wave_visit(self, c: Cell, fresh_ok: bool) -> Visit | None:
        p = policy_of(c.client)
        status = self.store.cell_status(c.cell_id)
        if status in ("done", "skipped") or (status in ("failed", "partial") and not fresh_ok):
            return None
        if status in ("failed", "partial") or status == "pending":
            return Visit(start=0, stop=1, slots=p.slots, finish=p.min <= 1, fresh=True, first_in_run=fresh_ok)
        prior = tuple(self.store.stored_repeats(c.cell_id))
        n = len(prior)
        if n == 0 or [r.record.repeat for r in prior] != list(range(n)):
            return Visit(start=0, stop=1, slots=p.slots, finish=p.min <= 1, fresh=True, first_in_run=fresh_ok)
        if n >= p.min:  # every repeat stored, the cell left unfinished: finish it on this boot, measuring nothing more
            return Visit(start=n, stop=n, slots=p.slots, prior=prior, finish=True, fresh=False, first_in_run=fresh_ok)
        return Visit(start=n, stop=n + 1, slots=p.slots, prior=prior, finish=n + 1 >= p.min, fresh=False,
                     first_in_run=fresh_ok)

    # -- rounds
    def rounds(self) -> None:
        if not any(policy_of(c.client).adaptive for c in self.cells.values()):
            return
        meta = self.store.meta()
        plan = RoundPlan.from_json(meta.get(ROUND_META))
        done = int(meta.get(ROUNDS_DONE_META) or 0)
        while True:
            if plan is None:
                plan = plan_round(self.store, self.cells, done + 1, self.given_up)
                if not plan.targets:
                    return
                self.store.set_meta({ROUND_META: plan.as_json()})  # written ahead: a resumed run finishes it
            self._run_round(plan)
            done = plan.round
            self.store.set_meta({ROUND_META: "", ROUNDS_DONE_META: str(done)})
            plan = None

    def _run_round(self, plan: RoundPlan) -> None:
        counts = self.store.repeat_counts()
        visits: dict[str, Visit] = {}
        for cid, target in plan.targets.items():
            c = self.cells.get(cid)
            n = counts.get(cid, 0)
            if c is None or n >= target or self.store.cell_status(cid) != "done":
                continue
            p = policy_of(c.client)
            prior = tuple(self.store.stored_repeats(cid))
            visits[cid] = Visit(start=n, stop=target, slots=p.slots, prior=prior, finish=True, fresh=False,
                                merge=True, round=plan.round, reason=plan.reasons.get(cid))
        info = RoundInfo(plan.round, plan.questions, {cid: plan.reasons.get(cid, "") for cid in visits},
                         {cid: _label(self.cells[cid]) for cid in visits})
        self.report.rounds.append(info)
        if not visits:
            return
        self.progress.note(f"round {plan.round}: one more repeat for {len(visits)} cells of {plan.questions} open "
                           f"question(s)")
        for cid, why in info.reasons.items():
            self.progress.note(f"  {info.labels[cid]}: {why}")
        self.progress.more(len(visits))
        self.execute(self._work(visits))
        after = self.store.repeat_counts()
        for cid, v in visits.items():
            if after.get(cid, 0) >= v.stop:
                info.added += 1
            else:  # its server did not boot, or the run could not measure it: no more rounds for it in this run
                self.given_up.add(cid)


def _label(c: Cell) -> str:
    """'spec3 tp=1 c=4' (the workload axes beyond the lengths when the cell sets them)."""
    from specbench.load.axes import extras_text

    extra = extras_text(c.client)
    return f"{c.label} tp={c.tp} c={c.client.get('concurrency')}" + (f" {extra}" if extra else "")
