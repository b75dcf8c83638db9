"""Device-only shim for SGLang 0.5.15.post1 boots with CUDA graphs on (tools/gpu/README.md).

`sglang/srt/speculative/eagle_worker_v2.py::_capture_cuda_graphs@0.5.15` imports
`sglang.srt.layers.attention.dsa_backend.DeepseekSparseAttnBackend` only to ask `isinstance(backend, ...)` before it
captures the draft-extend graph; that module imports the CuTe DSL (`cutlass`, package nvidia-cutlass-dsl with its
CUDA libraries), which the device image lacks and which is too large to carry. Our boots never use DeepSeek sparse
attention, so a stand-in class answers the isinstance check with False, exactly as the real class would.
Put this folder on PYTHONPATH for the server processes; it changes nothing else.
"""

import sys
import types

_NAME = "sglang.srt.layers.attention.dsa_backend"
if _NAME not in sys.modules:
    _mod = types.ModuleType(_NAME)

    class DeepseekSparseAttnBackend:  # never instantiated: only the isinstance check reads it
        pass

    _mod.DeepseekSparseAttnBackend = DeepseekSparseAttnBackend
    sys.modules[_NAME] = _mod
