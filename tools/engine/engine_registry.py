"""Write what an engine release can serve, read from its own source (nothing of the engine is imported):

- `archs`: the model architectures it implements.
  SGLang: every `EntryClass = X` / `EntryClass = [X, Y]` of `sglang/srt/models/*.py` (the registry imports each
  module and keys its entry classes by `__name__`: sglang/srt/models/registry.py::import_model_classes); an entry
  bound by import or alias is followed to the class it names.
  vLLM: the keys of the `_*_MODELS` dicts of `vllm/model_executor/models/registry.py` (`_VLLM_MODELS` and the
  speculative ones), without `_PREVIOUSLY_SUPPORTED_MODELS`.
- `spec`: SGLang's speculative algorithms, the members of `SpeculativeAlgorithm` in
  `sglang/srt/speculative/spec_info.py` (without NONE).
- `quant`: the `--quantization` values. SGLang: the `QUANTIZATION_CHOICES` list of `sglang/srt/server_args.py`
  (argparse `choices=`); vLLM: the `QuantizationMethods` Literal of
  `vllm/model_executor/layers/quantization/__init__.py`.

    pip download --no-deps sglang==0.5.15.post1 -d /tmp/w && unzip -o /tmp/w/sglang-*.whl 'sglang/srt/*' -d /tmp/w
    python tools/engine/engine_registry.py archs sglang /tmp/w/sglang/srt/models 0.5.15.post1 \
        > src/specbench/engines/sglang/architectures/0.5.15.txt
    python tools/engine/engine_registry.py spec sglang /tmp/w/sglang/srt/speculative/spec_info.py 0.5.15.post1 \
        > src/specbench/engines/sglang/spec_algorithms/0.5.15.txt
    python tools/engine/engine_registry.py quant sglang /tmp/w/sglang/srt/server_args.py 0.5.15.post1 \  # 0.5.18+: arg_groups/choices.py
        > src/specbench/engines/sglang/quant_methods/0.5.15.txt
    python tools/engine/engine_registry.py archs vllm .../vllm/model_executor/models/registry.py 0.32.0 \
        > src/specbench/engines/vllm/architectures/0.32.0.txt

One name a line, sorted, after a `#` header naming the source; read by engines/cli_flags.py::flag_list (the newest
list at or below a release).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def _names(node: ast.expr) -> list[ast.expr]:
    return list(node.elts) if isinstance(node, (ast.List, ast.Tuple)) else [node]


def _class_name(tree: ast.Module, node: ast.expr) -> str | None:
    """The `__name__` of the class `node` names in module `tree`: a local class, an import (`as` undone) or an alias."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if not isinstance(node, ast.Name):
        return None
    name = node.id
    for st in tree.body:
        if isinstance(st, ast.ClassDef) and st.name == name:
            return name
    for st in ast.walk(tree):
        if isinstance(st, ast.ImportFrom):
            for a in st.names:
                if (a.asname or a.name) == name:
                    return a.name
        if (isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)
                and st.targets[0].id == name and isinstance(st.value, (ast.Name, ast.Attribute))):
            return _class_name(tree, st.value)
    return name


def sglang_archs(models: Path) -> set[str]:
    out: set[str] = set()
    for f in sorted(models.glob("*.py")):
        tree = ast.parse(f.read_text(encoding="utf-8-sig"))
        for st in tree.body:
            if isinstance(st, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "EntryClass" for t in st.targets):
                out.update(n for e in _names(st.value) if (n := _class_name(tree, e)))
    return out


def vllm_archs(registry: Path) -> set[str]:
    tree = ast.parse(registry.read_text(encoding="utf-8-sig"))
    out: set[str] = set()
    for st in tree.body:
        target = st.target if isinstance(st, ast.AnnAssign) else (st.targets[0] if isinstance(st, ast.Assign) else None)
        if (isinstance(target, ast.Name) and target.id.endswith("_MODELS") and target.id != "_PREVIOUSLY_SUPPORTED_MODELS"
                and isinstance(st.value, ast.Dict)):
            out.update(k.value for k in st.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
    return out


def spec_algorithms(spec_info: Path) -> set[str]:
    tree = ast.parse(spec_info.read_text(encoding="utf-8-sig"))
    for cls in ast.walk(tree):
        if isinstance(cls, ast.ClassDef) and cls.name == "SpeculativeAlgorithm":
            return {t.id for st in cls.body if isinstance(st, ast.Assign)
                    for t in st.targets if isinstance(t, ast.Name) and t.id != "NONE"}
    raise SystemExit(f"{spec_info}: no class SpeculativeAlgorithm")


def quant_methods(engine: str, path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8-sig"))
    for st in ast.walk(tree):
        target = st.target if isinstance(st, ast.AnnAssign) else (st.targets[0] if isinstance(st, ast.Assign) else None)
        name = target.id if isinstance(target, ast.Name) else ""
        if engine == "sglang" and name == "QUANTIZATION_CHOICES" and isinstance(st.value, ast.List):
            return {e.value for e in st.value.elts if isinstance(e, ast.Constant)}
        if engine == "vllm" and name == "QuantizationMethods" and isinstance(st.value, ast.Subscript):
            return {e.value for e in _names(st.value.slice) if isinstance(e, ast.Constant)}
    raise SystemExit(f"{path}: no --quantization list found")


def main(kind: str, engine: str, path: str, release: str) -> None:
    p = Path(path)
    if kind == "archs":
        names = sglang_archs(p) if engine == "sglang" else vllm_archs(p)
        src = "sglang/srt/models/*.py EntryClass" if engine == "sglang" else \
            "vllm/model_executor/models/registry.py _*_MODELS"
    elif kind == "spec":
        names, src = spec_algorithms(p), "sglang/srt/speculative/spec_info.py::SpeculativeAlgorithm"
    elif kind == "quant":
        names = quant_methods(engine, p)
        src = "sglang/srt/server_args.py::QUANTIZATION_CHOICES" if engine == "sglang" else \
            "vllm/model_executor/layers/quantization/__init__.py::QuantizationMethods"
    else:
        raise SystemExit(f"unknown kind {kind!r}: archs | spec | quant")
    print(f"# {kind} of {engine} {release}: {src}@{release} (tools/engine/engine_registry.py)")
    for n in sorted(names):
        print(n)


if __name__ == "__main__":
    main(*sys.argv[1:5])
