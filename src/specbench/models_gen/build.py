"""Write tiny model folders to disk (the only module here with side effects).

A folder is written under a temporary name and renamed into place, so a half-written model never looks
complete; a model counts as present when every file in `MODEL_FILES` exists.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from safetensors.numpy import save_file
from tokenizers import Tokenizer

from specbench.errors import UserError
from specbench.models_gen.configs import generation_config, model_config
from specbench.models_gen.shapes import ALL_MODELS, TinyModelSpec
from specbench.models_gen.tokenizer import TokenizerSpec, train_tokenizer, write_tokenizer
from specbench.models_gen.weights import param_count, state_dict

MODEL_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
               "tokenizer_config.json", "special_tokens_map.json")


@dataclass(frozen=True, slots=True)
class BuiltModel:
    name: str
    path: Path
    params: int | None  # None when an existing folder was kept
    built: bool
    seconds: float


def is_complete(folder: Path) -> bool:
    return all((folder / f).is_file() for f in MODEL_FILES)


def build_model(spec: TinyModelSpec, out_dir: Path, tok_spec: TokenizerSpec = TokenizerSpec(),
                force: bool = False, tokenizer: Tokenizer | None = None) -> BuiltModel:
    """Build one model into `out_dir/spec.name`; keep an existing complete folder unless `force`.
    `tokenizer`: an already trained `train_tokenizer(tok_spec)` (all tiny models share one vocabulary)."""
    target = out_dir / spec.name
    if is_complete(target) and not force:
        return BuiltModel(spec.name, target, None, False, 0.0)
    t0 = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{spec.name}.", dir=out_dir))
    try:
        write_tokenizer(tokenizer or train_tokenizer(tok_spec), tok_spec, tmp)
        sd = state_dict(spec)
        save_file(sd, str(tmp / "model.safetensors"), metadata={"format": "pt"})
        _write_json(tmp / "config.json", model_config(spec))
        _write_json(tmp / "generation_config.json", generation_config())
        tmp.chmod(0o755)  # mkdtemp makes 0700 folders and safetensors 0600 files
        for f in tmp.iterdir():
            f.chmod(0o644)
        if target.exists():
            shutil.rmtree(target)
        tmp.rename(target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return BuiltModel(spec.name, target, param_count(sd), True, time.perf_counter() - t0)


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
    tok = train_tokenizer(tok_spec) if any(force or not is_complete(out_dir / s.name) for s in specs) else None
    return [build_model(s, out_dir, tok_spec, force=force, tokenizer=tok) for s in specs]


def _write_json(path: Path, obj: object) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n", encoding="utf-8")
