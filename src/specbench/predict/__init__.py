"""Predicted tok/s, TPOT and speedup over AR per matrix cell: a roofline step-cost model whose overheads and
efficiencies are calibrated from recorded stores (issue 25). `specbench calibrate` / `specbench predict`."""
