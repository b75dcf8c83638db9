"""Write tiny model folders to disk (the only module here with side effects).

A folder is written under a temporary name and renamed into place, so a half-written model never looks
complete. A model counts as present when every file in `MODEL_FILES` exists and its config.json carries the
current generator fingerprint (a hash of this package's generating code and the model's spec), so editing
the generator rebuilds old folders instead of silently keeping them.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path

from safetensors.numpy import save_file
from tokenizers import Tokenizer

from specbench.errors import UserError
from specbench.models_gen import gpt_oss
from specbench.models_gen.configs import generation_config, model_config
from specbench.models_gen.folder import staged_folder
from specbench.models_gen.shapes import ALL_MODELS as QWEN_MODELS
from specbench.models_gen.shapes import TinyModelSpec
from specbench.models_gen.tokenizer import TokenizerSpec, train_tokenizer, write_tokenizer
from specbench.models_gen.weights import param_count, state_dict

AnySpec = TinyModelSpec | gpt_oss.GptOssSpec
# gpt-oss lives in its own module (and only its fingerprint hashes it), so adding it kept the older folders current
ALL_MODELS: tuple[AnySpec, ...] = (*QWEN_MODELS, gpt_oss.TINY_SWA)

MODEL_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
               "tokenizer_config.json", "special_tokens_map.json")


_GENERATOR_SOURCES = ("corpus.py", "tokenizer.py", "shapes.py", "weights.py", "configs.py")


@dataclass(frozen=True, slots=True)
class BuiltModel:
    name: str
    path: Path
    params: int | None  # None when an existing folder was kept
    built: bool
    seconds: float
    replaced_stale: bool = False  # an older generator's folder was rebuilt


def fingerprint(spec: AnySpec, tok_spec: TokenizerSpec) -> str:
    """Hash of the generating code and the specs: equal fingerprints give byte-identical folders."""
    h = hashlib.sha256()
    pkg = Path(__file__).parent
    extra = ("gpt_oss.py",) if isinstance(spec, gpt_oss.GptOssSpec) else ()
    for name in (*_GENERATOR_SOURCES, *extra):
        h.update((pkg / name).read_bytes())
    h.update(repr(spec).encode())
    h.update(repr(tok_spec).encode())
    return h.hexdigest()[:16]


def is_complete(folder: Path) -> bool:
    """Every file is there (whatever generator made it)."""
    return all((folder / f).is_file() for f in MODEL_FILES)


def is_current(folder: Path, spec: AnySpec, tok_spec: TokenizerSpec = TokenizerSpec()) -> bool:
    """Complete and made by this generator for this spec."""
    if not is_complete(folder):
        return False
    try:
        cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    gen = cfg.get("specbench_generated")
    return isinstance(gen, dict) and gen.get("fingerprint") == fingerprint(spec, tok_spec)


def build_model(spec: AnySpec, out_dir: Path, tok_spec: TokenizerSpec = TokenizerSpec(),
                force: bool = False, tokenizer: Tokenizer | None = None) -> BuiltModel:
    """Build one model into `out_dir/spec.name`; keep an existing current folder unless `force`.
    `tokenizer`: an already trained `train_tokenizer(tok_spec)` (all tiny models share one vocabulary)."""
    target = out_dir / spec.name
    if not force and is_current(target, spec, tok_spec):
        return BuiltModel(spec.name, target, None, False, 0.0)
    stale = is_complete(target)
    t0 = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    with staged_folder(target) as tmp:
        write_tokenizer(tokenizer or train_tokenizer(tok_spec), tok_spec, tmp)
        fp = fingerprint(spec, tok_spec)
        if isinstance(spec, gpt_oss.GptOssSpec):
            sd, cfg = gpt_oss.state_dict(spec), gpt_oss.model_config(spec, fp)
        else:
            sd, cfg = state_dict(spec), model_config(spec, fp)
        save_file(sd, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        _write_json(tmp / "config.json", cfg)
        _write_json(tmp / "generation_config.json", generation_config())
    return BuiltModel(spec.name, target, param_count(sd), True, time.perf_counter() - t0,
                      replaced_stale=stale and not force)


def build_all(out_dir: Path, force: bool = False, names: tuple[str, ...] | None = None) -> list[BuiltModel]:
    """Build every tiny model (or those in `names`) under `out_dir`."""
    specs = ALL_MODELS if names is None else tuple(s for s in ALL_MODELS if s.name in names)
    unknown = set(names or ()) - {s.name for s in ALL_MODELS}
    if unknown:
        raise UserError(f"unknown tiny model(s): {', '.join(sorted(unknown))}; "
                        f"known: {', '.join(s.name for s in ALL_MODELS)}")
    if out_dir.exists() and not out_dir.is_dir():
        raise UserError(f"--out {out_dir} exists and is not a folder")
    tok_spec = TokenizerSpec()
    tok = train_tokenizer(tok_spec) if any(force or not is_current(out_dir / s.name, s, tok_spec)
                                           for s in specs) else None
    return [build_model(s, out_dir, tok_spec, force=force, tokenizer=tok) for s in specs]


def _write_json(path: Path, obj: object) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n", encoding="utf-8")
