"""Logs of engines specbench does not read: named from lines only they print, so the doctor says whose log it is
instead of an empty budget and "neither a start nor a failure".

Signatures (each engine's own start-up lines): llama.cpp / llama-server (`llama_model_loader:`,
`llama_new_context_with_model:`, `ggml_cuda_init:`, `llm_load_tensors:`), Ollama (its Go server's
`source=server.go` / `msg="starting llama server"` lines and `ollama` itself), Hugging Face TGI
(`text_generation_launcher` / `text_generation_router`), TensorRT-LLM (`[TensorRT-LLM]`, `tensorrt_llm`), LMDeploy
(`lmdeploy`), MLC LLM (`mlc_llm`), Triton Inference Server (`I1206 ... server.cc`, `Started GRPCInferenceService`).
"""

from __future__ import annotations

import re

SIGNATURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("Ollama", re.compile(r'source=server\.go|msg="starting llama server"|\bollama\b', re.I)),
    ("llama.cpp", re.compile(r"^\s*(llama_model_loader|llama_new_context_with_model|llama_context|ggml_cuda_init|"
                             r"llm_load_tensors|llama_kv_cache_init|main: server is listening)", re.M)),
    ("Hugging Face TGI", re.compile(r"text_generation_(launcher|router|server)")),
    ("TensorRT-LLM", re.compile(r"\[TensorRT-LLM\]|tensorrt_llm")),
    ("LMDeploy", re.compile(r"\blmdeploy\b")),
    ("MLC LLM", re.compile(r"\bmlc_llm\b")),
    ("Triton Inference Server", re.compile(r"Started GRPCInferenceService|tritonserver")),
)


def foreign_engine(text: str) -> str | None:
    """The engine a log that is neither SGLang's nor vLLM's comes from, when its lines say; else None."""
    head = text[:200_000]
    for name, pattern in SIGNATURES:
        if pattern.search(head):
            return name
    return None
