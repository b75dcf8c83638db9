"""A results store as data: its SQLite schema (`schema.py`, which the writer `matrix/store.py` creates), the
read-only reader (`read.py::load_store`) and the records it returns (`records.py`: ServerRecord, CellRecord,
RequestRecord, LoadedStore), with the check that a done cell's numbers can be (`impossible.py`). Below the report,
the step-cost model (predict/observe.py) and the runner, which all read stores through it; above `load` (the
metric and speedup arithmetic the records use)."""
