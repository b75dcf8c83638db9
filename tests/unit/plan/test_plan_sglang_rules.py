"""Single SGLang rules the incident and the real boots do not exercise."""

from specbench.contracts_inputs import PlanOptions
from specbench.plan.api import plan_command

CMD = "python -m sglang.launch_server --model-path Qwen/Qwen3-8B"


def _plan(extra: str = "") -> dict:
    return plan_command(f"{CMD} {extra}", PlanOptions(gpu="h200", fixes=False))


def test_online_fp8_quantization_plans_one_byte_linears():
    """--quantization fp8 on a bf16 checkpoint: linears at 1 B/param, embed_tokens and lm_head stay bf16
    (Qwen3-8B: 6.95 B linear params + 2 x 151,936 x 4,096 embedding/head params)."""
    bf16, fp8 = _plan(), _plan("--quantization fp8")
    assert any("quantizes at load" in n for n in fp8["notes"])
    emb = 2 * 151_936 * 4_096 * 2 / 2**30
    linear_bf16 = bf16["weights_estimate_gib"] - emb
    assert abs(fp8["weights_estimate_gib"] - (emb + linear_bf16 / 2)) < 0.05
    assert fp8["kv_tokens"] > bf16["kv_tokens"]  # the memory it frees goes to the KV pool
