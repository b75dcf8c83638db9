"""Decisions: which configuration to run at one workload and concurrency, on throughput and on latency, with a
tie margin, from the estimates of load/speedup.py (pure functions; the report and the runner's repeat-until-decided
rounds both read them)."""

from specbench.decide.question import METRICS, Arm, Decision, Headline, Metric, Standing, arm_of, decide, looks_of
from specbench.decide.verdict import TIE_MARGIN, Comparison, Verdict, compare, more_text, verdict_of

__all__ = ["METRICS", "TIE_MARGIN", "Arm", "Comparison", "Decision", "Headline", "Metric", "Standing", "Verdict",
           "arm_of", "compare", "decide", "looks_of", "more_text", "verdict_of"]
