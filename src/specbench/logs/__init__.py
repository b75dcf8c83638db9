"""Engine logs as data, below the engines: clean lines (normalize.py), bounded reading (reader.py), the facts of one
boot (facts.py, folded by lineacc.Acc), the parser that folds lines with the readers the engines give it (parse.py),
argument dumps (serverargs.py), the failure and warning machinery the engines' rule tables plug into (failures.py,
warnings.py), the model behind an argument dump (launch_model.py). Nothing here imports an engine: each engine's
line formats and rules live in `engines/<engine>/`, and the doctor (`specbench.doctor`) brings the two together.
"""
