"""A bundled sibling in place of a checkpoint whose own config is out of reach (offline, not cached): quantized and
renamed checkpoints (`-FP8`, `-NVFP4`, `-NVFP4-V2`, `-AWQ`, `-AWQ-4bit`, `-GPTQ-Int4`, `-autoround-int4`,
`-Instruct-2507`, `Meta-Llama-...`) and local folders named after a repo (`/models/Qwen3-8B-FP8`).

The name is read word by word (`-`/`_`): quantization words are taken off (they say which quantization the
checkpoint carries), then, only when no bundled config has what is left, rename words (a date such as `2507`, then
`Instruct` / `Thinking` / `Chat` / `Base`, then a `Meta-` prefix). What is left must be one bundled config
(specs/resolve.py::_bundled_match): that is the stand-in, the same architecture and shapes. The quantization is then
applied as the published checkpoints of that kind write it, in this order:
1. a bundled variant of the same architecture with the same quantization word (the sibling's known variant: its
   `quantization_config` / `hf_quant_config.json` is copied, e.g. Qwen3-32B-FP8's block-128 FP8 for Qwen3-8B-FP8);
2. else the form the publishers write (`FORMS`): Qwen/DeepSeek FP8 = `quant_method fp8`, e4m3, 128x128 blocks;
   NVIDIA ModelOpt FP8 / NVFP4 = `hf_quant_config.json` (`quant_algo`, FP8 KV, `exclude_modules: [lm_head]`);
   RedHatAI `FP8-dynamic` = compressed-tensors per-channel FP8; AutoAWQ GEMM 4-bit g128 with zero points; GPTQ
   4/8-bit g128 symmetric; AutoRound 4-bit g128 symmetric (GPTQ packing); llm-compressor W4A16 / W8A8;
   bitsandbytes NF4;
3. a name without a quantization word takes the launch command's `--quantization` as the checkpoint's.
A renamed checkpoint keeps the stand-in's fields except those the rename is known to change (`RENAMES`: the Qwen3
`-2507` releases have a 262,144-token native context, their config.json `max_position_embeddings`).

Every stand-in says which config stood in, what was assumed and from what, and what would make it exact
(`ModelOrigin.stand_in`, the plan key `model_stand_in`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# quantization words of checkpoint names -> the kind they mean (lower case, matched as whole words)
_QUANT_WORDS: dict[str, str] = {
    "fp8": "fp8", "nvfp4": "nvfp4", "mxfp4": "mxfp4", "awq": "awq", "gptq": "gptq", "autoround": "autoround",
    "auto-round": "autoround", "w4a16": "w4a16", "w8a8": "w8a8", "int8": "int8", "int4": "int4", "bnb": "bnb",
    "nf4": "bnb", "fp4": "nvfp4", "bf16": "bf16", "fp16": "bf16",
}
# words that qualify a quantization word and go with it (`-NVFP4-V2`, `-AWQ-4bit`, `-FP8-dynamic`, `-W4A16-G128`)
_QUALIFIERS = re.compile(r"^(v\d+|\d+bit|\d+-bit|dynamic|static|block|g\d+|gs\d+|marlin|gemm|kv|quantized|quant)$")
_DATE = re.compile(r"^(\d{4}|\d{6})$")
_ROLE_WORDS = ("instruct", "thinking", "chat", "base", "it", "hf", "coder")
# drafter words of published drafter names -> the SpecForge template word of the bundled drafters
_DRAFT_WORDS = {"eagle3": "eagle3", "eagle": "eagle3", "dflash": "dflash", "mtp": "mtp"}
_BITS = re.compile(r"^(\d+)-?bit$")
_SNAPSHOT = re.compile(r"models--([^/]+?)--([^/]+)/snapshots/[0-9a-f]+")

# fields a rename is known to change: word -> (fields, where the real value is stated)
RENAMES: dict[str, tuple[dict[str, int], str]] = {
    "2507": ({"max_position_embeddings": 262144},
             "the Qwen3 -2507 checkpoints' config.json (262,144-token native context)"),
}


@dataclass(frozen=True)
class NameRead:
    quant: str | None              # the quantization kind the name says (`fp8`, `nvfp4`, `awq`, `gptq-int4` ...)
    quant_words: tuple[str, ...]   # the words that said it, as written
    bits: int | None
    dynamic: bool
    base: str                      # the name without the quantization words


def _split_dotted(w: str) -> list[str]:
    """`quantized.w8a8` (neuralmagic's names) -> `w8a8`: a dotted word is split only when a part is a quantization
    word (`3.1` in `Llama-3.1` stays whole)."""
    parts = w.split(".")
    if len(parts) > 1 and any(p.lower() in _QUANT_WORDS for p in parts):
        return [p for p in parts if p and p.lower() != "quantized"]
    return [w]


def read_name(tail: str) -> NameRead:
    words = [p for w in re.split(r"[-_]", tail) if w for p in _split_dotted(w)]
    kinds: list[str] = []
    taken: list[str] = []
    bits: int | None = None
    dynamic = False
    keep: list[str] = []
    for i, w in enumerate(words):
        lw = w.lower()
        prev_quant = bool(taken) and i > 0 and words[i - 1] in taken
        if lw in _QUANT_WORDS:
            kinds.append(_QUANT_WORDS[lw])
            taken.append(w)
            if lw in ("int4", "int8"):
                bits = int(lw[3:])
        elif prev_quant and _QUALIFIERS.match(lw):
            taken.append(w)
            m = _BITS.match(lw)
            bits = int(m.group(1)) if m else bits
            dynamic = dynamic or lw == "dynamic"
        else:
            keep.append(w)
    return NameRead(_kind(kinds, bits), tuple(taken), bits, dynamic, "-".join(keep))


def _kind(kinds: list[str], bits: int | None) -> str | None:
    if not kinds:
        return None
    for k in ("nvfp4", "mxfp4", "awq", "gptq", "autoround", "w4a16", "w8a8", "bnb", "fp8", "bf16"):
        if k in kinds:
            return f"{k}-int{bits}" if k in ("gptq", "autoround") and bits else k
    return "int8" if "int8" in kinds else "int4"


def renamed_bases(base: str) -> list[tuple[str, tuple[str, ...]]]:
    """The base name and, one step at a time, the names with rename words taken off (with the words)."""
    out: list[tuple[str, tuple[str, ...]]] = [(base, ())]
    words = base.split("-")
    dated = [w for w in words if _DATE.match(w)]
    if dated:
        words = [w for w in words if w not in dated]
        out.append(("-".join(words), tuple(dated)))
    roles = tuple(w for w in words if w.lower() in _ROLE_WORDS)
    if roles:
        words = [w for w in words if w.lower() not in _ROLE_WORDS]
        out.append(("-".join(words), (*dated, *roles)))
    if words and words[0].lower() == "meta":
        out.append(("-".join(words[1:]), (*dated, *roles, words[0])))
    elif words and words[0].lower() == "llama":  # `Llama-3.1-405B`: meta-llama publishes the base as Meta-Llama-3.1-405B
        out.append(("-".join(["Meta", *words]), (*dated, *roles, "Meta- prefix")))
    return out


def _form(kind: str, org: str, dynamic: bool,
          flag: str | None) -> tuple[dict[str, object] | None, dict[str, object] | None, str]:
    """(quantization_config, hf_quant_config, words) of the form the publishers write for `kind` (JSON blocks, read
    by specs/quant.py as it reads a checkpoint's own)."""
    if kind == "fp8" and (org == "nvidia" or flag in ("modelopt", "modelopt_fp8")):
        return None, {"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8",
                                       "exclude_modules": ["lm_head"]}}, "NVIDIA ModelOpt FP8 (FP8 KV, lm_head kept)"
    if kind == "fp8" and (dynamic or org.lower() in ("redhatai", "neuralmagic")):
        return {"quant_method": "compressed-tensors", "ignore": ["lm_head"], "config_groups": {"group_0": {
            "targets": ["Linear"], "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
            "input_activations": {"num_bits": 8, "type": "float", "dynamic": True}}}}, None, \
            "compressed-tensors per-channel FP8 (lm_head kept)"
    if kind == "fp8":
        return {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                "weight_block_size": [128, 128], "modules_to_not_convert": ["lm_head"]}, None, \
            "FP8 e4m3 in 128x128 blocks (lm_head kept)"
    if kind == "nvfp4":
        return None, {"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16,
                                       "exclude_modules": ["lm_head"]}}, "ModelOpt NVFP4, groups of 16 (lm_head kept)"
    if kind == "mxfp4":
        return {"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]}, None, "MXFP4 MoE experts"
    if kind == "awq":
        return {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}, None, \
            "AWQ 4-bit, groups of 128, zero points"
    if kind.startswith(("gptq", "int4", "autoround")):
        bits = int(kind.rsplit("int", 1)[1]) if "-int" in kind else 4
        method = "auto-round" if kind.startswith("autoround") else "gptq"
        return {"quant_method": method, "bits": bits, "group_size": 128, "sym": True, "desc_act": False}, None, \
            f"{'AutoRound' if method == 'auto-round' else 'GPTQ'} {bits}-bit, groups of 128, symmetric"
    if kind == "w4a16":
        return {"quant_method": "compressed-tensors", "ignore": ["lm_head"], "config_groups": {"group_0": {
            "targets": ["Linear"], "weights": {"num_bits": 4, "type": "int", "strategy": "group", "group_size": 128,
                                               "symmetric": True}}}}, None, "W4A16 int4, groups of 128"
    if kind in ("w8a8", "int8"):
        return {"quant_method": "compressed-tensors", "ignore": ["lm_head"], "config_groups": {"group_0": {
            "targets": ["Linear"], "weights": {"num_bits": 8, "type": "int", "strategy": "channel"},
            "input_activations": {"num_bits": 8, "type": "int", "dynamic": True}}}}, None, "W8A8 int8"
    if kind == "bnb":
        return {"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}, None, \
            "bitsandbytes NF4"
    return None, None, kind


# `--quantization` values that say what the checkpoint carries when its name does not
_FLAG_KINDS = {"fp8": "fp8", "modelopt": "fp8", "modelopt_fp8": "fp8", "modelopt_fp4": "nvfp4", "mxfp4": "mxfp4",
               "awq": "awq", "awq_marlin": "awq", "gptq": "gptq-int4", "gptq_marlin": "gptq-int4",
               "auto-round": "autoround-int4", "auto_round": "autoround-int4", "compressed-tensors": "w4a16",
               "bitsandbytes": "bnb"}


@dataclass(frozen=True)
class StandIn:
    path: Path                                  # the bundled config that stands in
    label: str                                  # its model id
    quantization_config: Mapping[str, Any] | None
    hf_quant_config: Mapping[str, Any] | None
    fields: Mapping[str, Any]                   # config fields a known rename changes
    text: str                                   # the one line: stand-in, assumption, what makes it exact
    drop_quant: bool = False                    # a `-BF16` name planned on a quantized sibling: unquantized
    assumed: frozenset[str] = frozenset()       # the field groups it assumed (specs/assumed.py)


def _known_variant(base: Path, kind: str, bundled: dict[str, Path]) -> tuple[str, Path] | None:
    """A bundled config of the same architecture whose name carries the same quantization word."""
    arch = _arch(base)
    found = [(name, p) for name, p in sorted(bundled.items())
             if p != base and arch and read_name(name.split("__", 1)[-1]).quant == kind and _arch(p) == arch]
    if not found:
        return None
    # the nearest name first: Qwen3-30B-A3B-FP8 for Qwen3-30B-A3B, before Qwen3-235B-A22B-FP8
    stem = base.stem.lower()
    name, p = max(found, key=lambda f: len(os.path.commonprefix([f[0].lower(), stem])))
    return name.replace("__", "/", 1), p


def _is_drafter(p: Path) -> bool:
    from specbench.specs.model_families import DRAFT_ARCHS

    return _arch(p) in DRAFT_ARCHS or any(w in p.stem.lower() for w in ("eagle", "dflash", "-mtp", "draft"))


def _words(name: str) -> list[str]:
    return [w for w in re.split(r"[-_.]", name.lower()) if w]


def _drafter(source: str, tail: str, bundled: dict[str, Path]) -> StandIn | None:
    """A published drafter (`AngelSlim/Qwen3-8B_eagle3`, `z-lab/Qwen3-8B-DFlash-b16`,
    `lmsys/SGLang-EAGLE3-Qwen3-30B-A3B-Instruct-2507-SpecForge-Nex`) -> the bundled SpecForge template of the same
    algorithm whose target words (`qwen3`, `30b`, `a3b`) all appear in the name, the one with the most."""
    words = re.split(r"[-_]", tail.lower())
    algo = next((_DRAFT_WORDS[w] for w in words if w in _DRAFT_WORDS), None)
    if algo is None:
        return None
    have = set(_words(tail.replace(".", "-")))
    have |= {w for w in re.split(r"[-_]", tail.lower())}
    best: tuple[int, str, Path] | None = None
    for name, p in bundled.items():
        org, _, model = name.partition("__")
        if org != "specforge" or not model.lower().endswith("-" + algo):
            continue
        need = [w for w in re.split(r"[-_]", model.lower().removesuffix("-" + algo)) if w]
        if all(w in have for w in need) and (best is None or len(need) > best[0]):
            best = (len(need), name, p)
    if best is None:
        return None
    label = best[1].replace("__", "/", 1)
    return StandIn(best[2], label, None, None, {},
                   f"{source}: planned on the bundled {label}, a SpecForge {algo} template for the same target (its "
                   "shapes, not the published drafter's); the drafter's config.json makes it exact: a local folder, "
                   "the HF cache, or the Hub", assumed=frozenset({"shapes", "context", "quantization", "architecture"}))


def _arch(p: Path) -> str | None:
    try:
        archs = json.loads(p.read_text(encoding="utf-8")).get("architectures") or []
    except (OSError, ValueError):
        return None
    return str(archs[0]) if archs else None


def _quant_blocks(p: Path) -> tuple[dict[str, object] | None, dict[str, object] | None]:
    """A bundled config's quantization_config and its sibling hf_quant_config.json (None: absent, or not an object)."""
    cfg = json.loads(p.read_text(encoding="utf-8"))
    hq_path = p.with_name(p.stem + "__hf_quant_config.json")
    hq = json.loads(hq_path.read_text(encoding="utf-8")) if hq_path.is_file() else None
    qc = cfg.get("quantization_config")
    return (qc if isinstance(qc, dict) else None), (hq if isinstance(hq, dict) else None)


def find_stand_in(source: str, why: str, match: Any, bundled: dict[str, Path], flag: str | None) -> StandIn | None:
    """The stand-in for `source` (a repo id or a path named after one), or None when no bundled config fits.
    `match(name) -> Path | None` is the bundled-name rule (resolve.py::_bundled_match)."""
    raw = source.strip().replace("\\", "/").rstrip("/")
    snap = _SNAPSHOT.search(raw)
    if snap is not None:  # an HF-cache snapshot folder: the repo is in its path, the tail is a commit
        raw = f"{snap.group(1)}/{snap.group(2)}"
    tail = raw.rsplit("/", 1)[-1]
    if "--" in tail:  # an HF-cache style folder name: `Qwen--Qwen3-30B-A3B`, `models--Qwen--Qwen3-8B`
        tail = tail.removeprefix("models--").split("--", 1)[-1]
        hit = match(tail)
        if hit is not None:
            return StandIn(hit, hit.stem.replace("__", "/", 1), None, None, {},
                           f"{source}: read as the HF-cache folder of {hit.stem.replace('__', '/', 1)} (its bundled "
                           "config); the folder's own config.json makes it exact")
    drafter = _drafter(source, tail, bundled)
    if drafter is not None:
        return drafter
    org = raw.split("/", 1)[0] if raw.count("/") == 1 and not raw.startswith((".", "/", "~")) else ""
    nr = read_name(tail)
    flag_kind = _FLAG_KINDS.get((flag or "").lower()) if flag else None
    kind = nr.quant or flag_kind
    if kind is None and not any(_DATE.match(w) or w.lower() in _ROLE_WORDS or w.lower() == "meta"
                                for w in tail.split("-")):
        return None  # nothing in the name to take off: not a variant of a bundled model
    for cand, dropped in renamed_bases(nr.base):
        if not cand or (cand == tail and not dropped):
            continue
        if kind == "bf16":  # `-BF16`: the unquantized checkpoint of a model bundled only as its quantized variants
            hit = match(cand) or next((p for n, p in sorted(bundled.items()) if not _is_drafter(p)
                                       and n.lower().split("__", 1)[-1].startswith(cand.lower() + "-")), None)
            if hit is not None:
                label = hit.stem.replace("__", "/", 1)
                return StandIn(hit, label, None, None, {}, f"{source}: planned on the bundled config of {label} "
                               f"(same architecture) without its quantization, assumed from the name's "
                               f"`{'-'.join(nr.quant_words)}`; the checkpoint's config.json makes it exact",
                               drop_quant=True, assumed=frozenset({"quantization"}))
            continue
        hit = match(f"{org}/{cand}" if org else cand) or match(cand)
        if hit is None or _is_drafter(hit):  # a drafter never stands in for a model
            continue
        return _build(source, hit, nr, kind, org, flag, flag_kind, dropped, why, bundled)
    return None


def _build(source: str, hit: Path, nr: NameRead, kind: str | None, org: str, flag: str | None,
           flag_kind: str | None, dropped: tuple[str, ...], why: str, bundled: dict[str, Path]) -> StandIn:
    label = hit.stem.replace("__", "/", 1)
    qc, hq, how = None, None, ""
    own_qc, own_hq = _quant_blocks(hit)
    if kind is not None and (own_qc or own_hq) and read_name(hit.stem.split("__", 1)[-1]).quant == kind:
        how = f"its own {kind} quantization"
    elif kind is not None:
        known = _known_variant(hit, kind, bundled)
        if known is not None:
            qc, hq = _quant_blocks(known[1])
            how = f"the quantization of {known[0]}, the same architecture's known {kind} variant"
        else:
            qc, hq, how = _form(kind, org, nr.dynamic, flag)
    said = (f"the name's `{'-'.join(nr.quant_words)}`" if nr.quant else f"--quantization {flag}") if kind else ""
    fields: dict[str, int] = {}
    renamed = ""
    if dropped:
        for w in dropped:
            if w in RENAMES:
                fields.update(RENAMES[w][0])
        changed = "; ".join(f"{k}={v:,}" if isinstance(v, int) else f"{k}={v}" for k, v in fields.items())
        renamed = (f"; the rename ({', '.join(dropped)}) is assumed to keep its shapes"
                   + (f" (with {changed} from {', '.join(RENAMES[w][1] for w in dropped if w in RENAMES)})"
                      if fields else ""))
    quant = f" with {how}, assumed from {said}" if kind else " unquantized"
    repo = source if "/" in source and not source.startswith(("/", ".", "~")) else None
    exact = ("the checkpoint's config.json makes it exact: a local model folder, the HF cache"
             + (f" (huggingface-cli download {repo} config.json)" if repo else "")
             + (", or the Hub (unset HF_HUB_OFFLINE)" if "OFFLINE" in why else ", or the Hub"))
    text = f"{source}: planned on the bundled config of {label} (same architecture){quant}{renamed}; {exact}"
    # what was written rather than read: the quantization (from the name or the flag), a rename's fields and shapes
    assumed = ({"quantization"} if kind is not None else set()) | ({"context", "shapes"} if dropped else set())
    return StandIn(hit, label, qc, hq, fields, text, assumed=frozenset(assumed))


_ALGO_WORDS = {"EAGLE3": "eagle3", "EAGLE": "eagle3", "DFLASH": "dflash", "DDTREE": "dflash"}


def template_for_target(target: str, algorithm: str, bundled: dict[str, Path], match: Any) -> Path | None:
    """The bundled SpecForge template of `algorithm` for the launch's target (its bundled config or stand-in): the
    drafter of a command whose own drafter config is out of reach (`AngelSlim--Qwen3-a3B_eagle3` for
    Qwen3-30B-A3B)."""
    word = _ALGO_WORDS.get(algorithm.upper())
    if word is None:
        return None
    hit = match(target)
    if hit is None:
        si = find_stand_in(target, "", match, bundled, None)
        hit = si.path if si is not None else None
    if hit is None:
        return None
    model = hit.stem.split("__", 1)[-1].lower()
    for name, p in sorted(bundled.items()):
        org, _, m = name.partition("__")
        if org == "specforge" and m.lower() == f"{model}-{word}":
            return p
    return None
