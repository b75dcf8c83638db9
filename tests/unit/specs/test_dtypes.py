"""One dtype -> bytes table (specs/dtypes.py) behind the config side and both engines."""

from __future__ import annotations

import pytest

from specbench.engines.sglang import formulas as sg
from specbench.engines.vllm import common, layout, pages, pool
from specbench.engines.vllm.common import dtype_bytes
from specbench.engines.vllm.layout import kv_dtype_bytes_for
from specbench.errors import FlagError
from specbench.specs import dtypes
from specbench.specs.quant import Scheme


def test_table_and_canonical_names():
    assert dtypes.dtype_bytes("torch.bfloat16") == 2.0 and dtypes.dtype_bytes("Float32") == 4.0
    assert dtypes.dtype_bytes("float8_e4m3fn") == 1.0
    with pytest.raises(FlagError) as e:
        dtypes.dtype_bytes("bf17", what="--kv-cache-dtype")
    assert "--kv-cache-dtype 'bf17'" in str(e.value) and "bfloat16" in str(e.value) and "\n" not in str(e.value)


def test_engine_spellings_resolve_through_the_table():
    assert dtype_bytes("fp8_inc") == 1 and dtype_bytes("torch.float16") == 2 and dtype_bytes("int8") == 1
    assert isinstance(dtype_bytes("float32"), int)
    assert sg.dtype_bytes("fp4_e2m1") == 1 and sg.dtype_bytes("nvfp4") == 1 and sg.dtype_bytes("auto") == 2
    assert sg.dtype_bytes("fp8_e4m3") == 1 and sg.dtype_bytes("mxfp8") == 1 and sg.dtype_bytes("float32") == 4


def test_unknown_dtypes_are_errors_with_the_list():
    with pytest.raises(FlagError) as e:
        sg.dtype_bytes("banana")
    assert "banana" in str(e.value) and "bfloat16" in str(e.value) and "'banana'," not in str(e.value)
    with pytest.raises(FlagError) as e:
        dtype_bytes("fp4")  # vLLM's rules do not model it
    assert "fp8_inc" in str(e.value)
    with pytest.raises(FlagError):
        kv_dtype_bytes_for("nvfp4", "bfloat16")
    assert kv_dtype_bytes_for("auto", "bfloat16") == 2 and kv_dtype_bytes_for("fp8_e5m2", "bfloat16") == 1


def test_config_side_dense_scheme():
    assert Scheme.dense("bfloat16").bytes_per_param == 2.0 and Scheme.dense("float32").bytes_per_param == 4.0
    assert not any(hasattr(m, "DTYPE_BYTES") for m in (common, layout, pages, pool))  # the vLLM sizing modules
