"""The report's predicted-vs-measured section: each done cell's tok/s and speedup as the step-cost model
(specbench/predict/) predicts them from the shipped calibrations, beside what the store measured, and the error.

Speculative cells are predicted with their own measured accept length (acceptance is the model's input, not its
output). Each row carries the prediction's state (calibrated / extrapolated / uncalibrated, predict/trust.py), its
interval and whether the measured speedup lies inside it, and whether the store was one the calibration was fitted
on (then the error is in-sample). Built once when the report is (build.py), rendered by markdown.py / html.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING

from specbench.errors import UserError

if TYPE_CHECKING:
    from specbench.stored.records import LoadedStore


@dataclass(frozen=True)
class PredictedRow:
    store: str
    label: str
    tp: int
    concurrency: int
    tok_s: float
    tok_s_predicted: float
    speedup: float | None
    speedup_predicted: float | None
    source: str
    state: str = ""
    interval: tuple[float, float] | None = None
    in_calibration: bool = False
    stand_in: str | None = None  # what the cell measured that no real model would (predict/observe.py): not judged

    @property
    def error(self) -> float | None:
        """(predicted - measured) / measured speedup; for AR cells, of tok/s."""
        if self.speedup is not None and self.speedup_predicted is not None and self.speedup > 0:
            return self.speedup_predicted / self.speedup - 1.0
        if self.speedup is None and self.tok_s > 0:
            return self.tok_s_predicted / self.tok_s - 1.0
        return None


@dataclass(frozen=True)
class PredictedSection:
    rows: tuple[PredictedRow, ...] = ()
    calibration: str = ""
    note: str = ""  # why there are no rows


def predicted_section(paths: Sequence[str | Path], loaded: Sequence[LoadedStore] | None = None) -> PredictedSection:
    """Never raises for a store the model cannot read: the section then says why."""
    try:
        from specbench.predict.api import baseline_of, predict_stored
        from specbench.predict.calibration import shipped
        from specbench.predict.observe import all_observations

        cal = shipped()
        fitted = {Path(s).name for s in cal.stores}  # by file name: the calibration keeps the paths it was given
        obs = all_observations(list(loaded) if loaded is not None else [str(p) for p in paths])
    except (UserError, ValueError, OSError) as exc:
        return PredictedSection(note=f"no predictions: {exc}")
    rows = []
    for o in obs:
        try:
            p = predict_stored(cal, o, baseline_of(o, obs))
        except (ValueError, ArithmeticError):  # a cell whose numbers the model cannot use: left out
            continue
        if p is None:
            continue
        iv = (p.speedup_lo, p.speedup_hi) if p.speedup_lo is not None and p.speedup_hi is not None else None
        rows.append(PredictedRow(Path(o.store).stem, o.label, o.shape.tp, o.shape.concurrency, o.tok_s, p.tok_s,
                                 o.speedup, p.speedup if o.speedup is not None else None, p.source, p.state,
                                 iv if o.speedup is not None else None, Path(o.store).name in fitted, o.stand_in))
    note = "" if rows else "no predictions: no done cell on a GPU with roofline ceilings whose [plan] names the model"
    return PredictedSection(tuple(rows), cal.source, note)


def _f(x: float | None, fmt: str) -> str:
    return "–" if x is None else format(x, fmt)


def _inside(r: PredictedRow) -> str:
    if r.interval is None or r.speedup is None:
        return "–"
    return "yes" if r.interval[0] <= r.speedup <= r.interval[1] else "no"


def _cells(r: PredictedRow) -> list[str]:
    err = r.error
    iv = "–" if r.interval is None else f"{r.interval[0]:.2f}-{r.interval[1]:.2f}"
    return [r.store, r.label, str(r.tp), str(r.concurrency), _f(r.tok_s, ".1f"), _f(r.tok_s_predicted, ".1f"),
            _f(r.speedup, ".3f"), _f(r.speedup_predicted, ".3f"), iv, _inside(r),
            "–" if err is None else f"{100 * err:+.1f} %",
            (r.state or "–") + (", a stand-in's artifact: not judged (below)" if r.stand_in else ""),
            "yes (in-sample)" if r.in_calibration else "no", r.source]


HEADER = ["store", "config", "TP", "c", "tok/s", "predicted tok/s", "speedup", "predicted speedup", "interval",
          "inside", "error", "state", "store in the calibration", "constants"]
INTRO = ("The step-cost model (`specbench predict`) with the calibration {cal}; speculative cells use their measured "
         "accept length. Error: of the speedup, for AR cells of tok/s. Interval: 95 % on the log scale from the "
         "calibration's leave-one-store-out error, widened where the cell lies outside what it calibrated (state "
         "`extrapolated`). A store the calibration was fitted on is in-sample: its errors say how well the model fits, "
         "not how well it predicts.")


def markdown_lines(s: PredictedSection) -> list[str]:
    lines = ["## Predicted vs measured", ""]
    if not s.rows:
        return lines + [s.note or "No predictions.", ""]
    lines += [INTRO.format(cal=f"`{s.calibration}`"), ""]
    lines += ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in _cells(r)) + " |" for r in s.rows]
    return lines + [""] + [f"A stand-in's artifact ({n} cells): {why}" for why, n in _stand_ins(s).items()] + [""]


def html_lines(s: PredictedSection) -> list[str]:
    out = ['<h2 id="predicted">Predicted vs measured</h2>']
    if not s.rows:
        return out + [f"<p>{escape(s.note or 'No predictions.')}</p>"]
    out.append(f"<p>{escape(INTRO.format(cal=s.calibration))}</p>")
    out.append("<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in HEADER) + "</tr>" +
               "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in _cells(r)) + "</tr>" for r in s.rows) +
               "</table>")
    out += [f"<p>A stand-in's artifact ({n} cells): {escape(why)}</p>" for why, n in _stand_ins(s).items()]
    return out


def _stand_ins(s: PredictedSection) -> dict[str, int]:
    """Each reason a row is a stand-in's artifact, with how many rows it marks."""
    out: dict[str, int] = {}
    for r in s.rows:
        if r.stand_in:
            out[r.stand_in] = out.get(r.stand_in, 0) + 1
    return out
