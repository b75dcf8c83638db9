"""The doctor: diagnose engine logs, above the engines.

doctor.py (one log: status, failure, facts, budget, sentences, planner fixes; its parts lastboot.py, notes.py,
fixes.py and replan.py, the planner link) -> diff.py (two boots side by side);
reading.py collects each engine's log knowledge (line readers, warning and failure rules) through the engine
registry (`Engine.log_tables()`) and reads the log with it through the data layer `specbench.logs` (normalize,
parse, facts, failures, warnings), which names no engine; explain.py holds the engine-neutral sentences, each engine its own
(`engines/<engine>/explain.py`).
"""
