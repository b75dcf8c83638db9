"""specbench: plan, diagnose, run and report speculative-decoding benchmarks on SGLang and vLLM."""

__version__ = "0.1.0"
