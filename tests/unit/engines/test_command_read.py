"""Launch commands read as a shell runs them (engines/command.py): docker images, env words, unsupported servers and
shell variables, each case a command as users paste it."""

from __future__ import annotations

import pytest

from specbench.contracts_inputs import PlanOptions
from specbench.engines.command import read_command, revisions_of
from specbench.errors import UserError
from specbench.plan.api import plan_command


@pytest.mark.parametrize("cmd, engine, head", [
    ("docker run --gpus all --shm-size 32g -e SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 -p 30000:30000 "
     "lmsysorg/sglang:latest python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B",
     "sglang", ["SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1", "python3", "-m", "sglang.launch_server"]),
    ("docker run --runtime nvidia --gpus all -v ~/.cache/huggingface:/root/.cache/huggingface --env HF_TOKEN=x "
     "-p 8000:8000 --ipc=host vllm/vllm-openai:latest --model Qwen/Qwen3-8B", "vllm",
     ["HF_TOKEN=x", "vllm", "serve", "--model", "Qwen/Qwen3-8B"]),
    ("sudo docker run -it --rm vllm/vllm-openai Qwen/Qwen3-8B --tensor-parallel-size 2", "vllm",
     ["vllm", "serve", "Qwen/Qwen3-8B"]),
    ("docker run --entrypoint python3 vllm/vllm-openai -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-8B",
     "vllm", ["python3", "-m", "vllm.entrypoints.openai.api_server"]),
    ("CUDA_VISIBLE_DEVICES=0,1 uv run vllm serve Qwen/Qwen3-8B -tp 2", "vllm", ["CUDA_VISIBLE_DEVICES=0,1", "uv"]),
    ("python -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-8B", "vllm", ["python", "-m"]),
    ("sglang serve --model-path Qwen/Qwen3-8B", "sglang", ["sglang", "serve"]),
    ("env HF_HUB_OFFLINE=1 python3 -m sglang.launch_server --model Qwen/Qwen3-8B", "sglang", ["HF_HUB_OFFLINE=1"]),
])
def test_engine_and_words(cmd, engine, head):
    c = read_command(cmd)
    assert c.engine.name == engine and c.argv[: len(head)] == head


def test_docker_vllm_command_is_planned_with_vllm_rules():
    p = plan_command("docker run --gpus all vllm/vllm-openai:latest --model Qwen/Qwen3-8B --max-model-len 8192",
                     PlanOptions(fixes=False))
    assert p["engine"] == "vllm" and p["max_model_len"] == 8192
    assert p["model_notes"][0].startswith("read as the vllm image vllm/vllm-openai:latest")


@pytest.mark.parametrize("cmd, name", [
    ("trtllm-serve Qwen/Qwen3-8B --tp_size 2", "TensorRT-LLM"),
    ("text-generation-launcher --model-id Qwen/Qwen3-8B --num-shard 2", "Text Generation Inference"),
    ("lmdeploy serve api_server Qwen/Qwen3-8B --tp 2", "LMDeploy"),
    ("/opt/llama.cpp/llama-server -m model.gguf -ngl 99", "llama.cpp"),
    ("python3 -m tensorrt_llm.commands.serve Qwen/Qwen3-8B", "TensorRT-LLM"),
    ("docker run --gpus all ghcr.io/huggingface/text-generation-inference:3.0 --model-id Qwen/Qwen3-8B", "TGI"),
])
def test_unsupported_servers_are_named_not_guessed(cmd, name):
    with pytest.raises(UserError, match="which specbench does not plan") as exc:
        read_command(cmd)
    assert name in str(exc.value) and "\n" not in str(exc.value)


def test_a_shell_variable_is_named_and_a_shell_tail_is_dropped():
    with pytest.raises(UserError, match=r"shell variable \$MODEL "):
        read_command('vllm serve "$MODEL" --port 8000')
    with pytest.raises(UserError, match=r"shell variable \$TP "):
        read_command("python -m sglang.launch_server --model-path Qwen/Qwen3-8B --tp ${TP}")
    c = read_command('vllm serve Qwen/Qwen3-8B --port 8000 >> "$LOG_FILE" 2>&1 &')
    assert c.argv[-1] == "8000" and c.notes == ('ignored the shell tail `>> $LOG_FILE 2>&1 &`',)


def test_a_docker_image_nobody_knows_without_a_command_is_refused():
    with pytest.raises(UserError, match="is not one specbench knows"):
        read_command("docker run --gpus all myorg/server:1 ")


def test_revision_flags():
    assert revisions_of(["x", "--revision", "v2", "--speculative-draft-model-revision=abc"]) == {
        "model": "v2", "draft": "abc"}
    assert revisions_of(["x", "--revision"]) == {}
