"""A pasted launch command read as a shell would run it, before any engine reads its flags (engine-neutral).

0. a command held in a variable (`START_CMD="python -m sglang.launch_server ..."`, then `eval $START_CMD`) or run
   after `export X=...;` / `X=... &&` lines is unwrapped: the assignments become the environment, the held (or
   first real) command is read, the lines after it are a shell tail (`_unwrap`);
1. words (`argv.split_command`); a shell tail (`>> log 2>&1 &`, `| tee`, `; ...`) is dropped and said so;
2. `sudo` / `env` and leading `VAR=value` words: the environment the engine sees;
3. `docker run` / `podman run`: docker's own options are skipped (their values too), `-e VAR=value` joins the
   environment, the image picks the engine (each engine package's `image_argv`: its images and what their
   ENTRYPOINT prepends) and the words after the image are its arguments;
4. a server specbench does not plan (TensorRT-LLM, TGI, LMDeploy, llama.cpp, Ollama) is named in a one-line
   error instead of being read with another engine's flags;
5. a word holding a shell variable (`$MODEL`, `${PORT}`) is a one-line error naming it: its value is unknown here;
6. the engine that recognises the words (`Engine.recognise`) reads them.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specbench.engines.argv import is_env_word, leading_env, split_command
from specbench.errors import UserError

# programs of servers specbench does not plan: the words that start them -> the engine's name
UNSUPPORTED: tuple[tuple[tuple[str, ...], str], ...] = (
    (("trtllm-serve",), "TensorRT-LLM (trtllm-serve)"),
    (("python", "-m", "tensorrt_llm"), "TensorRT-LLM"),
    (("text-generation-launcher",), "Hugging Face Text Generation Inference (text-generation-launcher)"),
    (("lmdeploy", "serve"), "LMDeploy (lmdeploy serve)"),
    (("llama-server",), "llama.cpp (llama-server)"),
    (("ollama", "serve"), "Ollama"),
)
_UNSUPPORTED_IMAGES = (("nvcr.io/nvidia/tensorrt-llm", "TensorRT-LLM"), ("text-generation-inference", "TGI"),
                       ("openmmlab/lmdeploy", "LMDeploy"), ("llama.cpp", "llama.cpp"), ("ollama/ollama", "Ollama"))

# docker run options that take a value (docker/cli cli/command/container/opts.go::addFlags); the rest are switches
_DOCKER_VALUE_OPTS = {
    "-a", "--attach", "--add-host", "--blkio-weight", "--cap-add", "--cap-drop", "--cgroup-parent", "--cgroupns",
    "--cidfile", "--cpu-period", "--cpu-quota", "--cpu-shares", "-c", "--cpus", "--cpuset-cpus", "--cpuset-mems",
    "--device", "--device-cgroup-rule", "--dns", "--dns-option", "--dns-search", "--domainname", "--entrypoint",
    "-e", "--env", "--env-file", "--expose", "--gpus", "--group-add", "--health-cmd", "--health-interval",
    "--health-retries", "--health-start-period", "--health-timeout", "-h", "--hostname", "--ip", "--ip6", "--ipc",
    "--isolation", "--kernel-memory", "-l", "--label", "--label-file", "--link", "--log-driver", "--log-opt",
    "--mac-address", "-m", "--memory", "--memory-reservation", "--memory-swap", "--memory-swappiness", "--mount",
    "--name", "--network", "--net", "--network-alias", "--oom-score-adj", "--pid", "--pids-limit", "--platform",
    "-p", "--publish", "--pull", "--restart", "--runtime", "--security-opt", "--shm-size", "--stop-signal",
    "--stop-timeout", "--storage-opt", "--sysctl", "--tmpfs", "-u", "--user", "--userns", "--uts", "-v",
    "--volume", "--volume-driver", "--volumes-from", "-w", "--workdir", "--ulimit",
}
_SHELL_TAIL = re.compile(r"^(\||\|\||&&|;|&|\d?>>?|\d?>&\d|&>|<|2>&1|>\S+|>>\S+)$")
_SHELL_VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")


@dataclass(frozen=True)
class Command:
    engine: Any               # the Engine that reads argv
    argv: list[str]           # VAR=value words, then the program and its arguments
    notes: tuple[str, ...]


def _drop_shell_tail(words: list[str]) -> tuple[list[str], str | None]:
    for i, w in enumerate(words):
        if _SHELL_TAIL.match(w):
            return words[:i], " ".join(words[i:])
    return words, None


def _unsupported(program: Sequence[str]) -> str | None:
    low = [w.lower().rsplit("/", 1)[-1] if i == 0 else w.lower() for i, w in enumerate(program)]
    if low and low[0].startswith("python"):
        low[0] = "python"
    for words, name in UNSUPPORTED:
        head = tuple(low[: len(words)])
        if head == words or (len(words) == 3 and len(head) == 3 and head[:2] == words[:2]
                             and head[2].startswith(words[2])):
            return name
    return None


def _docker(words: list[str]) -> tuple[list[str], str, str | None, list[str]] | None:
    """`docker run OPTS IMAGE ARGS` -> (env words from -e, image, --entrypoint, ARGS); None if not docker run."""
    if len(words) < 2 or words[0].rsplit("/", 1)[-1] not in ("docker", "podman", "nvidia-docker") \
            or words[1] not in ("run", "create"):
        return None
    env: list[str] = []
    entry: str | None = None
    i = 2
    while i < len(words) and words[i].startswith("-"):
        opt, eq, val = words[i].partition("=")
        if opt in _DOCKER_VALUE_OPTS and not eq:
            val = words[i + 1] if i + 1 < len(words) else ""
            i += 1
        if opt in ("-e", "--env") and is_env_word(val):
            env.append(val)
        if opt == "--entrypoint":
            entry = val
        i += 1
    if i >= len(words):
        raise UserError("the docker command names no image")
    return env, words[i], entry, words[i + 1:]


_WRAPPED = re.compile(r"^\s*(export\s+)?[A-Za-z_]\w*=")
_SEPARATORS = (";", "&&", "||", "&", ";;")
_PROGRAMS = re.compile(r"(^|/)(python[\d.]*|sglang|vllm|docker|podman|nvidia-docker|sudo|env|trtllm-serve)$")


def _looks_like_command(words: Sequence[str]) -> bool:
    return bool(words) and bool(_PROGRAMS.search(words[0])) or any("launch_server" in w for w in words[:3])


def _segments(cmd: str) -> list[list[str]]:
    # `2>&1` / `&>` are redirections, not separators: kept whole through the split
    lex = shlex.shlex(cmd.replace(">&", ">\x01").replace("&>", "\x02>"), posix=True, punctuation_chars=";&|")
    lex.whitespace_split = True
    out: list[list[str]] = [[]]
    for raw in lex:
        tok = raw.replace("\x01", "&").replace("\x02", "&")
        if tok in _SEPARATORS:
            out.append([])
        else:
            out[-1].append(tok)
    return [seg for seg in out if seg]


def _unwrap(cmd: str) -> tuple[str | list[str], list[str]]:
    """`export X=1; export Y=2; CMD`, `X=1 && CMD` and `START_CMD="CMD"; eval $START_CMD` -> the words of CMD with
    the assignments before it as its environment (step 0 of the module docstring); other text is returned as is."""
    if not _WRAPPED.match(cmd) or not any(c in cmd for c in ";&") and not re.search(r"=[\"'][^\"']*\s", cmd):
        return cmd, []
    try:
        segments = _segments(cmd)
    except ValueError:
        return cmd, []  # an unbalanced quote: split_command says so in one line
    env: list[str] = []
    for i, seg in enumerate(segments):
        words = seg[1:] if seg[0] in ("export", "declare", "readonly") else seg
        after = segments[i + 1:]
        tail = [f"ignored the shell tail `{' ; '.join(' '.join(s) for s in after)}`"] if after else []
        if words and all(is_env_word(w) for w in words):
            for w in words:
                name, val = w.split("=", 1)
                inner = shlex.split(val) if " " in val.strip() else []
                if _looks_like_command(inner):
                    held = [x for x in words if x is not w]
                    return env + held + inner, [f"unwrapped the command held in {name}=\"...\"", *tail]
            env += words
            continue
        if not env:
            return cmd, []
        return env + words, [f"read the assignments before the command ({', '.join(e.split('=')[0] for e in env)}) as "
                             "its environment", *tail]
    return cmd, []


def read_command(cmd: str | Sequence[str], engine_name: str | None = None) -> Command:
    """The engine and the words it reads; one-line UserErrors for what cannot be planned."""
    from specbench.engines.base import engine, engine_for_command, engines

    if not isinstance(cmd, str) and len(cmd) == 1 and " " in cmd[0]:
        cmd = cmd[0]  # `specbench plan -- "the whole command in quotes"`
    if not isinstance(cmd, str) and cmd and _WRAPPED.match(cmd[0]) and any(w in _SEPARATORS or w.endswith(";")
                                                                            for w in cmd):
        cmd = shlex.join(cmd)  # `specbench plan -- export X=1 \; CMD` arrives as words: read them as the line
    unwrapped, notes = _unwrap(cmd) if isinstance(cmd, str) else (cmd, [])
    words, tail = _drop_shell_tail(split_command(unwrapped))
    notes += [f"ignored the shell tail `{tail}`"] if tail else []
    pairs, rest = leading_env(words)
    env = [f"{k}={v}" for k, v in pairs]
    picked: Any = engine(engine_name) if engine_name else None
    dock = _docker(rest)
    if dock is not None:
        denv, image, entry, args = dock
        env += denv
        for prefix, name in _UNSUPPORTED_IMAGES:
            if prefix in image.lower():
                raise UserError(f"the image {image} runs {name}, which specbench does not plan (it plans SGLang "
                                f"and vLLM)")
        owners: list[Any] = [picked] if picked else list(engines().values())
        found = [(e, e.image_argv(image, args, entry)) for e in owners]
        hits = [(e, a) for e, a in found if a is not None]
        if hits:
            picked, rest = hits[0]
            notes.append(f"read as the {picked.name} image {image}: {' '.join(rest[:4])} ...")
        else:
            rest = [entry, *args] if entry else list(args)
            if not rest:
                raise UserError(f"the docker image {image} is not one specbench knows (SGLang: lmsysorg/sglang, "
                                f"vLLM: vllm/vllm-openai) and no command follows it")
    server = _unsupported(rest)
    if server:
        raise UserError(f"`{' '.join(rest[:2])}` starts {server}, which specbench does not plan (it plans SGLang "
                        f"and vLLM)")
    for w in env + rest:
        m = _SHELL_VAR.search(w)
        if m:
            raise UserError(f"the launch command uses the shell variable ${m.group(1)} (in {w!r}): put its value "
                            f"in the command, specbench cannot know it")
    argv = env + rest
    return Command(picked or engine_for_command(argv), argv, tuple(notes))


# the Hub revision of each model a command loads: SGLang server_args.py::ServerArgs.revision and
# speculative_draft_model_revision, vLLM engine/arg_utils.py::EngineArgs.revision
REVISION_FLAGS = {"model": ("--revision",), "draft": ("--speculative-draft-model-revision",)}


def revisions_of(argv: Sequence[str]) -> dict[str, str]:
    """{"model": rev, "draft": rev} from the command's revision flags (`--flag v` or `--flag=v`)."""
    out: dict[str, str] = {}
    for role, flags in REVISION_FLAGS.items():
        for i, w in enumerate(argv):
            name, eq, val = w.partition("=")
            if name in flags:
                v = val if eq else (argv[i + 1] if i + 1 < len(argv) else "")
                if v and not v.startswith("-"):
                    out[role] = v
    return out
