"""Make vLLM's CPU build take the path of a CPU without AVX512-BF16 on a CPU that has it (recording only).

Put this folder on the engine's PYTHONPATH (tools/engine/record_boot.py --env PYTHONPATH=tools/engine/no_avx512_bf16).
Every Python process of the engine (API server, engine core, spawned worker) then sees
torch.cpu.get_capabilities()["avx512_bf16"] == False, so torch.cpu._is_avx512_bf16_supported() is False and vLLM
decides as on e.g. an Intel Cascade Lake Xeon: no SSM float32 reset (platforms/cpu.py::
CpuPlatform.check_and_update_config@0.32.0), the _C_AVX512 kernel library (CpuPlatform.import_kernels), the
Python GDN conv path. The CPU still has AVX-512F, so that library runs. Nothing else is changed.
"""

import importlib.abc
import importlib.util
import sys
from types import MappingProxyType


class _PatchTorchCpu(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "torch.cpu":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_patch(module):
            exec_module(module)
            caps = dict(module.get_capabilities())
            caps["avx512_bf16"] = False
            frozen = MappingProxyType(caps)
            module.get_capabilities = lambda: frozen   # _is_avx512_bf16_supported() reads this global

        spec.loader.exec_module = exec_and_patch
        return spec


sys.meta_path.insert(0, _PatchTorchCpu())
