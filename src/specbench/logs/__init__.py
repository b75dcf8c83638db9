"""Engine logs -> facts -> diagnosis.

normalize.py (clean lines, ranks) -> parse.py (per-format regexes -> LogFacts, facts.py) -> failures.py (kind +
the engine's text) -> doctor.py (status, budget.py table, explain.py sentences, planner fixes) -> diff.py (two boots).
engine_rules.py holds the few engine rules the reading needs (D, ρ, era, per-slot state size, weight check).
"""
