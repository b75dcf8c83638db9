"""Engine logs -> facts -> diagnosis.

normalize.py (clean lines, ranks) -> parse.py (boots, ranks; dispatch to sglang_lines.py / vllm_lines.py, which fill
lineacc.Acc) -> facts.py LogFacts -> failures.py (kind + the engine's text) -> doctor.py (status, budget.py table,
explain.py sentences, planner fixes) -> diff.py (two boots). engine_rules.py holds the few engine rules the reading
needs (D, ρ, era, per-slot state size, weight and KV-dtype checks); serverargs.py reads argument dumps.
"""
