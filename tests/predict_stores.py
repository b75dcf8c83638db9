"""Results stores written by the store module (matrix/store.py) whose cells follow the step model exactly, with
constants the test chooses: what the fit must recover. Shared by the predictor's tests."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from paths import ROOT
from specbench.matrix.store import RequestRow, Store
from specbench.predict.calibration import ceilings
from specbench.predict.cells import cell_shape
from specbench.predict.model import Params, step_s, ttft_s
from specbench.predict.roofline import INDEPENDENT


@dataclass(frozen=True)
class Target:
    model: str     # a bundled config name
    draft: str     # its EAGLE3 drafter template


LLAMA8 = Target("meta-llama/Llama-3.1-8B-Instruct", "specforge/llama3-8B-eagle3")
LLAMA70 = Target("meta-llama/Llama-3.1-70B-Instruct", "specforge/llama3-70B-eagle3")
QWEN_MOE = Target("Qwen/Qwen3-30B-A3B", "specforge/qwen3-30B-A3B-eagle3")


def matrix_text(t: Target, gpu: str = "H200") -> str:
    return (f'name = "synthetic"\nengine = "sglang"\n\n[plan]\nmodel_config = "{t.model}"\n'
            f'draft_config = "{t.draft}"\ngpu = "{gpu}"\nengine_version = "0.5.15.post1"\n')


def write_store(path: Path, t: Target, k: Params, *, accepts: tuple[float, ...] = (2.0, 3.0),
                concurrencies: tuple[int, ...] = (1, 4, 16, 32), cap: int = 64, graphs: bool = True,
                gpu: str = "H200", prompt: int = 512, output: int = 128, n_req: int = 8,
                recorded_gpu: str | None = None) -> Path:
    """AR plus one EAGLE3 server per accept length, every cell's requests timed by the model with constants `k` on
    `gpu`'s roofline; the store's [plan] names `recorded_gpu` when given (a GPU the catalog has no ceilings for)."""
    ceil = ceilings(gpu)
    assert ceil is not None
    plan_table = {"model_config": t.model, "draft_config": t.draft, "gpu": gpu, "engine_version": "0.5.15.post1"}
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", "/m", "--attention-backend", "triton"]
    if not graphs:
        argv += ["--cuda-graph-backend-decode", "disabled"]
    with Store(path) as st:
        st.set_meta({"matrix_text": matrix_text(t, recorded_gpu or gpu), "engine": "sglang", "engine_version": "0.5.15.post1"})
        servers = [("ar", {"tp": 1, "label": "ar", "algorithm": "ar"}, None)]
        for acc in accepts:
            servers.append((f"eagle3-sim{acc:g}", {"tp": 1, "label": f"eagle3-sim{acc:g}", "algorithm": "EAGLE3",
                                                   "num_steps": 3, "eagle_topk": 1, "num_draft_tokens": 4,
                                                   "simulated_accept_len": acc}, acc))
        for si, (label, settings, acc) in enumerate(servers):
            sid = f"srv-{si}"
            st.put_server(server_id=sid, phase=1, tp=1, engine="sglang", settings=settings, command=argv, env={},
                          verdict="launch", plan={"status": "ok", "max_running_requests": cap}, status="stopped")
            for c in concurrencies:
                cid = f"cell-{si}-{c}"
                client = {"concurrency": c, "prompt_tokens": prompt, "output_tokens": output, "num_requests": n_req,
                          "request_rate": "inf", "dataset": "random"}
                st.ensure_cell(cell_id=cid, server_id=sid, phase=1, tp=1, algorithm=settings["algorithm"],
                               label=label, server=settings, client=client)
                shape = cell_shape(settings, client, plan_table, cap, argv, routing=INDEPENDENT)  # real weights
                step, first = step_s(shape, ceil, k), ttft_s(shape, ceil, k)
                if acc is None:
                    verify, e2e = None, first + (output - 1) * step
                else:
                    verify = round(output / acc)
                    e2e = first + verify * step
                reqs = [RequestRow(i, prompt, output, first, e2e, None, None,
                                   None if verify is None else output / verify, verify) for i in range(n_req)]
                st.start_cell(cid)
                st.finish_cell(cid, "done", metrics={"duration_s": n_req * e2e / shape.batch, "concurrency": c},
                               requests=reqs)
    return path


MOE_EXAMPLE = ROOT / "examples" / "h200-sglang-qwen3-moe-eagle3.toml"


def local_matrix(folder: Path, example: Path = MOE_EXAMPLE, replace: tuple[tuple[str, str], ...] = ()) -> Path:
    """An example matrix whose drafter folder exists (matrix/toml_load.py refuses a missing one): its
    `/tmp/models/<name>` drafter becomes `folder/<name>` holding the bundled drafter config."""
    import shutil

    text = example.read_text(encoding="utf-8")
    for a, b in replace:
        text = text.replace(a, b)
    for name in set(re.findall(r'draft_model = "/tmp/models/([^"]+)"', text)):
        (folder / name).mkdir(parents=True, exist_ok=True)
        src = re.search(r'draft_config = "([^"]+)"', text)
        assert src is not None
        cfg = ROOT / "src" / "specbench" / "data" / "configs" / (src.group(1).replace("/", "__") + ".json")
        shutil.copy(cfg, folder / name / "config.json")
        text = text.replace(f'"/tmp/models/{name}"', f'"{folder / name}"')
    out = folder / example.name
    out.write_text(text, encoding="utf-8")
    return out
