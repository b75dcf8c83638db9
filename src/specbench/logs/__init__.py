"""Engine logs -> facts -> diagnosis.

normalize.py (clean lines, ranks) -> parse.py (boots, ranks; dispatch to each engine's `engines/<name>/loglines.py`,
which fills lineacc.Acc) -> facts.py LogFacts -> failures.py (kind + the engine's text) -> doctor.py (status, budget.py
table, explain.py sentences, planner fixes) -> diff.py (two boots). `engines/sglang/logrules.py` holds the few engine
rules the reading needs (D, ρ, era, per-slot state size, weight and KV-dtype checks); serverargs.py reads argument
dumps; engine_parts.py finds an engine folder's optional modules.
"""
