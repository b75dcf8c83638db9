"""Pass 4 of the input fuzz (issue 37 items 8): the files a user names, as they really arrive, through the real CLI.

- `kinds`: every option that reads a file, given a FIFO, a device, a folder, a socket, an empty or a huge sparse file,
  a results store, a gzip file, UTF-16 / UTF-32 / Latin-1 text, UTF-8 with a byte-order mark: refused at once in
  one line (the BOM'd UTF-8 file is read);
- `calibration`: a real calibration file with one field changed (roofline_optimism partial, a string, a list; a
  5,000-digit integer; 200k-deep nesting; `stores` as a string);
- `config`: a real config.json as `plan --model-config` / `--draft-config` with the same slips;
- `labels`: `[[server.spec]] label` templates, bounded (a width of 999,999,999 refused, not formatted);
- `stores`: a run of another matrix into an existing store, the same matrix again, `<store>-logs` as a file, a
  matrix in a folder whose name is not UTF-8, a report folder whose manifest was cut mid-write, stored metrics no
  run writes (0 completed requests on a done cell, a negative throughput).

Each case says before it runs what a correct answer is (`must_fail`, or an oracle on the exit-0 output).
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fuzz.harness import Case, Result

ROOT = Path(__file__).resolve().parents[2]
MATRIX = ROOT / "examples" / "h200-sglang-qwen3-8b-eagle3.toml"
CALIBRATION = ROOT / "src" / "specbench" / "data" / "calibrations" / "sglang.json"
CONFIG = ROOT / "src" / "specbench" / "data" / "configs" / "Qwen__Qwen2.5-7B-Instruct.json"
STORE = ROOT / "tests" / "data" / "h200-dense8b-sglang-0.5.15.post1" / "h200-dense8b.db"
PLAN = ["--", "vllm", "serve", "Qwen/Qwen2.5-7B-Instruct"]
REPORT_S = {"timeout_s": 90.0}
RUN_S = {"timeout_s": 60.0}


# ------------------------------------------------------------------------------------------------ oracles
def _json_out(res: Result) -> Any:
    try:
        return json.loads(res.stdout)
    except ValueError:
        return None


def predicted(source: str | None = None) -> Callable[[Result], str | None]:
    """`predict --json` answered with cells, and (when given) from the calibration file it was handed."""
    def oracle(res: Result) -> str | None:
        doc = _json_out(res)
        if not isinstance(doc, dict) or not doc.get("cells"):
            return "predict --json printed no cells"
        if source is not None and doc.get("calibration") != source:
            return f"predicted from {doc.get('calibration')!r}, not the calibration given ({source})"
        return None
    return oracle


def planned(res: Result) -> str | None:
    doc = _json_out(res)
    return None if isinstance(doc, dict) and doc.get("status") == "ok" else "plan --json did not plan the config"


def labels_are(want: list[str]) -> Callable[[Result], str | None]:
    def oracle(res: Result) -> str | None:
        doc = _json_out(res)
        got = sorted({c.get("label") for c in doc.get("cells", [])}) if isinstance(doc, dict) else None
        return None if got == sorted(want) else f"labels {got}, expected {sorted(want)}"
    return oracle


def exit_zero(res: Result) -> str | None:
    return None if res.rc == 0 else f"rc={res.rc}"


# ------------------------------------------------------------------------------------------------ file kinds
def _kinds(d: Path, good: bytes) -> dict[str, tuple[str, bool]]:
    """name -> (path, must the read be refused?). `good` is a valid file's bytes (for the re-encoded copies)."""
    d.mkdir(parents=True, exist_ok=True)
    text = good.decode("utf-8")
    out: dict[str, tuple[str, bool]] = {}

    def put(name: str, data: bytes, refused: bool = True) -> None:
        (d / name).write_bytes(data)
        out[name] = (str(d / name), refused)

    os.mkfifo(d / "fifo")
    out["fifo"] = (str(d / "fifo"), True)
    (d / "fifo-link").symlink_to(d / "fifo")
    out["fifo-link"] = (str(d / "fifo-link"), True)
    out["dev-zero"] = ("/dev/zero", True)
    out["dev-null"] = ("/dev/null", True)
    out["dev-urandom"] = ("/dev/urandom", True)
    out["folder"] = (str(d), True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(d / "sock"))  # the file stays after the socket closes (a socket file nobody listens on)
    sock.close()
    out["socket"] = (str(d / "sock"), True)
    put("empty", b"")
    with open(d / "sparse", "wb") as f:  # 3 GiB of holes: no disk, but a reader that reads it whole runs out
        f.truncate(3 << 30)
    out["sparse-3g"] = (str(d / "sparse"), True)
    shutil.copyfile(STORE, d / "store.db")
    out["store"] = (str(d / "store.db"), True)
    put("gzip", gzip.compress(good, mtime=0))
    put("utf16", text.encode("utf-16"))
    put("utf16-le-nobom", text.encode("utf-16-le"))
    put("utf32", text.encode("utf-32"))
    put("latin1", text.replace("\n", "\n# café\n", 1).encode("latin-1") if d.name == "toml"
        else text.replace("{", '{"caf\u00e9": 1, ', 1).encode("latin-1"))
    put("nul", good + b"\x00")
    put("binary", bytes(range(256)) * 4)
    put("utf8-bom", b"\xef\xbb\xbf" + good, refused=False)
    return out


def kind_cases(tmp: Path) -> list[Case]:
    cal_kinds = _kinds(tmp / "kinds" / "json", CALIBRATION.read_bytes())
    cfg_kinds = _kinds(tmp / "kinds" / "cfg", CONFIG.read_bytes())
    toml_kinds = _kinds(tmp / "kinds" / "toml", MATRIX.read_bytes())
    cases: list[Case] = []
    for name, (path, refused) in cal_kinds.items():
        cases.append(Case("kinds", ["predict", str(MATRIX), "--calibration", path, "--json"],
                          f"--calibration {name}", must_fail=refused, oracle=predicted(path)))
    for name, (path, refused) in cfg_kinds.items():
        for opt in ("--model-config", "--draft-config"):
            extra = ["--model-config", str(CONFIG)] if opt == "--draft-config" else []
            spec = (["--speculative-config", '{"method": "eagle3", "model": "x", "num_speculative_tokens": 3}']
                    if opt == "--draft-config" else [])
            cases.append(Case("kinds", ["plan", "--json", *extra, opt, path, *PLAN, *spec], f"plan {opt} {name}",
                              must_fail=refused, oracle=None if refused else exit_zero))
    for name, (path, refused) in toml_kinds.items():
        cases.append(Case("kinds", ["predict", path, "--json"], f"predict MATRIX={name}", must_fail=refused,
                          oracle=predicted()))
        cases.append(Case("kinds", ["run", path, "--dry-run", "--json", "--store", str(tmp / f"dry-{name}.db")],
                          f"run --dry-run MATRIX={name}", must_fail=refused, oracle=exit_zero))
        cases.append(Case("kinds", ["calibrate", "--quick", path, "--dry-run", "--store", str(tmp / f"q-{name}.db")],
                          f"calibrate --quick {name}", must_fail=refused, oracle=exit_zero))
    # results stores given something that is no store (a calibration file, a device, a FIFO ...)
    for name, (path, _) in cal_kinds.items():
        if name == "store":
            continue
        cases.append(Case("kinds", ["calibrate", path], f"calibrate STORE={name}", must_fail=True))
        cases.append(Case("kinds", ["predict", str(MATRIX), "--acceptance-from", path], f"--acceptance-from {name}",
                          must_fail=True))
        # an empty file is what a run killed right after it created its store leaves: a store with no cells
        cases.append(Case("kinds", ["export", path, "-f", "json"], f"export STORE={name}", must_fail=name != "empty",
                          oracle=lambda res: None if _json_out(res) == [] else "an empty file exported with cells"))
    return cases


# ------------------------------------------------------------------------------------------------ calibration fields
CAL_EDITS: tuple[tuple[str, Callable[[dict[str, Any]], None], bool], ...] = (
    ("optimism a string", lambda d: d.__setitem__("roofline_optimism", "high"), True),
    ("optimism a number", lambda d: d.__setitem__("roofline_optimism", 1.6), True),
    ("optimism a list", lambda d: d.__setitem__("roofline_optimism", [1.6, 1.7, 64]), True),
    ("optimism without cmax", lambda d: d["roofline_optimism"].pop("cmax"), True),
    ("optimism without cmax_concurrency", lambda d: d["roofline_optimism"].pop("cmax_concurrency"), True),
    ("optimism c1 as text", lambda d: d["roofline_optimism"].__setitem__("c1", "1.6"), True),
    ("optimism c1 negative", lambda d: d["roofline_optimism"].__setitem__("c1", -1.6), True),
    ("optimism c1 true", lambda d: d["roofline_optimism"].__setitem__("c1", True), True),
    ("optimism cmax_concurrency 0", lambda d: d["roofline_optimism"].__setitem__("cmax_concurrency", 0), True),
    ("optimism cmax_concurrency 2.5", lambda d: d["roofline_optimism"].__setitem__("cmax_concurrency", 2.5), True),
    ("optimism an unknown key", lambda d: d["roofline_optimism"].__setitem__("c2", 1.0), True),
    ("optimism empty", lambda d: d.__setitem__("roofline_optimism", {}), False),
    ("optimism null", lambda d: d.__setitem__("roofline_optimism", None), False),
    ("optimism absent", lambda d: d.pop("roofline_optimism"), False),
    ("optimism as written", lambda d: None, False),
    ("stores a string", lambda d: d.__setitem__("stores", "a.db"), True),
    ("stores of numbers", lambda d: d.__setitem__("stores", [1, 2]), True),
    ("classes an object", lambda d: d.__setitem__("classes", {"a": 1}), True),
    ("classes a string", lambda d: d.__setitem__("classes", "abc"), True),
    ("a class's n_step as text", lambda d: d["classes"][0].__setitem__("n_step", "many"), True),
    ("a class's stores a string", lambda d: d["classes"][0].__setitem__("stores", "a.db"), True),
    ("global a list", lambda d: d.__setitem__("global", [1, 2]), True),
    ("out_of_sample a list", lambda d: d.__setitem__("out_of_sample", [1]), True),
    ("coverage a string", lambda d: d.__setitem__("coverage", "all"), True),
)
BIG = "9" * 5000


def calibration_cases(tmp: Path) -> list[Case]:
    d = tmp / "cal"
    d.mkdir(parents=True, exist_ok=True)
    base = json.loads(CALIBRATION.read_text(encoding="utf-8"))
    cases: list[Case] = []
    for i, (what, edit, refused) in enumerate(CAL_EDITS):
        doc = json.loads(json.dumps(base))
        edit(doc)
        p = d / f"edit{i}.json"
        p.write_text(json.dumps(doc), encoding="utf-8")
        cases.append(Case("calibration", ["predict", str(MATRIX), "--calibration", str(p), "--json"], what,
                          must_fail=refused, oracle=predicted(str(p))))
    text = CALIBRATION.read_text(encoding="utf-8")
    raw = {
        "a 5,000-digit n_step": text.replace('"n_step": ', f'"n_step": {BIG}, "x": ', 1),
        "a 5,000-digit optimism c1": text.replace('"c1": ', f'"c1": {BIG}, "x": ', 1),
        "a 5,000-digit version": text.replace('"version": 2', f'"version": {BIG}', 1),
        "200k-deep stores": text.replace('"stores": [', '"stores": [' + "[" * 200_000 + "]" * 200_000 + ",", 1),
        "200k-deep object": "{" + '"a":{' * 200_000 + "}" * 200_001,
        "a 1e999 constant": text.replace('"e": ', '"e": 1e999, "x": ', 1),
        "NaN optimism": text.replace('"c1": ', '"c1": NaN, "x": ', 1),
        "cut mid-way": text[: len(text) // 2],
        "a JSON list": "[1, 2, 3]",
        "JSON null": "null",
        "two documents": text + text,
    }
    for what, body in raw.items():
        p = d / f"raw-{len(cases)}.json"
        p.write_text(body, encoding="utf-8")
        cases.append(Case("calibration", ["predict", str(MATRIX), "--calibration", str(p), "--json"], what,
                          must_fail=True))
    return cases


# ------------------------------------------------------------------------------------------------ model configs
def config_cases(tmp: Path) -> list[Case]:
    d = tmp / "cfg"
    d.mkdir(parents=True, exist_ok=True)
    text = CONFIG.read_text(encoding="utf-8")
    bodies = {
        "a 5,000-digit hidden_size": (text.replace('"hidden_size": ', f'"hidden_size": {BIG}, "x": ', 1), True),
        "a 5,000-digit unknown key": ('{"x": ' + BIG + ", " + text.lstrip()[1:], True),
        "200k-deep array": ('{"x": ' + "[" * 200_000 + "]" * 200_000 + ", " + text.lstrip()[1:], True),
        "200k-deep object": ("{" + '"a":{' * 200_000 + "}" * 200_001, True),
        "cut mid-way": (text[: len(text) // 2], True),
        "a JSON list": ("[1]", True),
        "as written": (text, False),
    }
    cases: list[Case] = []
    for i, (what, (body, refused)) in enumerate(bodies.items()):
        p = d / f"c{i}.json"
        p.write_text(body, encoding="utf-8")
        cases.append(Case("config", ["plan", "--json", "--model-config", str(p), *PLAN], f"--model-config {what}",
                          must_fail=refused, oracle=None if refused else planned))
    return cases


# ------------------------------------------------------------------------------------------------ label templates
LABEL_MATRIX = """name = "labels"
engine = "sglang"
command = ["python3", "-m", "sglang.launch_server", "--model-path", "/tmp/models/q3_8b"]
[plan]
model_config = "Qwen/Qwen3-8B"
draft_config = "specforge/qwen3-8b-eagle3"
gpu = "H200"
engine_version = "0.5.15.post1"
[server]
max_running_requests = 8
context_length = 2048
[[server.spec]]
label = "ar"
[[server.spec]]
label = {label}
algorithm = "EAGLE3"
draft_model = "draft"
num_steps = [2, 3]
eagle_topk = 1
num_draft_tokens = 4
[client]
concurrency = 1
prompt_tokens = 64
output_tokens = 32
num_requests = 2
dataset = "random"
"""

# (template, the labels it must give, or None when it must be refused)
LABELS: tuple[tuple[str, list[str] | None], ...] = (
    ("e{num_steps}", ["e2", "e3"]),
    ("e{num_steps:03d}", ["e002", "e003"]),
    ("e{num_steps:>4}", ["e   2", "e   3"]),
    ("e{num_steps:x<3}", ["e2xx", "e3xx"]),
    ("e{num_steps!r}", ["e2", "e3"]),
    ("e{num_steps}-k{eagle_topk}-d{num_draft_tokens}", ["e2-k1-d4", "e3-k1-d4"]),
    ("e{num_steps:.1f}", ["e2.0", "e3.0"]),
    ("e{{literal}}{num_steps}", ["e{literal}2", "e{literal}3"]),
    ("e{num_steps:999999999}", None),
    ("e{num_steps:>999999999}", None),
    ("e{num_steps:0999999999d}", None),
    ("e{num_steps:.999999999f}", None),
    ("e{num_steps:,.999999999}", None),
    ("e{num_steps:{eagle_topk}}", None),
    ("e{num_steps.__class__}", None),
    ("e{num_steps.real}", None),
    ("e{num_steps[0]}", None),
    ("e{0}", None),
    ("e{}", None),
    ("e{unknown}", None),
    ("e{num_steps", None),
    ("e}num_steps", None),
    ("e{num_steps!z}", None),
    ("e{num_steps:q}", None),
    ("x" * 100_000 + "{num_steps}", None),
    ("e{num_steps:1000}", None),
    ("e{num_steps:64}", ["e" + " " * 63 + "2", "e" + " " * 63 + "3"]),
    ("e\n{num_steps}", None),
    ("e/{num_steps}", ["e/2", "e/3"]),
)


def label_cases(tmp: Path) -> list[Case]:
    d = tmp / "labels"
    (d / "draft").mkdir(parents=True, exist_ok=True)  # a draft folder that exists: no warning beside the answer
    cases: list[Case] = []
    for i, (template, want) in enumerate(LABELS):
        p = d / f"m{i}.toml"
        p.write_text(LABEL_MATRIX.replace("{label}", json.dumps(template)), encoding="utf-8")
        show = template if len(template) < 60 else template[:20] + f"...({len(template)} chars)"
        for cmd in (["predict", str(p), "--json"], ["run", str(p), "--dry-run", "--json",
                                                     "--store", str(d / f"m{i}.db")]):
            oracle = labels_are(["ar", *want]) if want is not None and cmd[0] == "predict" else exit_zero
            cases.append(Case("labels", cmd, f"{cmd[0]}: label {show!r}", must_fail=want is None, oracle=oracle))
    return cases


# ------------------------------------------------------------------------------------------------ stores
def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "specbench", *args], capture_output=True, text=True, timeout=180,
                          cwd=cwd)


def _meta(db: Path) -> dict[str, str]:
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return {k: v for k, v in con.execute("SELECT key, value FROM meta")}
    finally:
        con.close()


def meta_is(db: Path, key: str, want: str) -> Callable[[Result], str | None]:
    def oracle(res: Result) -> str | None:
        got = _meta(db).get(key)
        return None if got == want else f"meta.{key} is {got!r}, expected {want!r}"
    return oracle


def _instant(path: Path, tok: Path, name: str, *, concurrency: str = "1", gpu: str | None = None) -> Path:
    sys.path.insert(0, str(ROOT / "tests"))
    from proc_helpers import free_port  # noqa: PLC0415 - tests/ helpers, on the path only here
    from run_helpers import instant_matrix  # noqa: PLC0415

    client = (f"concurrency = {concurrency}\nprompt_tokens = 16\noutput_tokens = 8\nnum_requests = 2\n"
              "warmup_requests = 0")
    instant_matrix(path, free_port(), tok, client, name=name)
    if gpu is not None:
        path.write_text(path.read_text(encoding="utf-8").replace("\n[timeouts]", f'\n[plan]\ngpu = "{gpu}"\n\n'
                                                                 "[timeouts]", 1), encoding="utf-8")
    return path


def store_cases(tmp: Path) -> list[Case]:
    sys.path.insert(0, str(ROOT / "tests"))
    from run_helpers import make_tokenizer  # noqa: PLC0415

    d = tmp / "stores"
    d.mkdir(parents=True, exist_ok=True)
    tok = make_tokenizer(d / "tok")
    a = _instant(d / "a.toml", tok, "a")
    b = _instant(d / "b.toml", tok, "b")
    a_more = _instant(d / "a-more.toml", tok, "a", concurrency="[1, 2]")  # the same matrix, one axis value more
    a_gpu = _instant(d / "a-gpu.toml", tok, "a", gpu="H100")  # the same name, another [plan] table
    done = d / "done.db"
    r = _cli("run", str(a), "--store", str(done), "--no-progress")
    assert r.returncode == 0, r.stderr
    cases: list[Case] = []

    def copy(name: str) -> Path:
        dst = d / f"{name}.db"
        shutil.copyfile(done, dst)
        return dst

    s = copy("other")
    cases.append(Case("stores", ["run", str(b), "--store", str(s), "--no-progress"], "another matrix's name into a "
                      "store", must_fail=True, extra=RUN_S))
    s = copy("gpu")
    cases.append(Case("stores", ["run", str(a_gpu), "--store", str(s), "--no-progress"], "the same name, another "
                      "[plan] table, into a store", must_fail=True, extra=RUN_S))
    s = copy("same")
    cases.append(Case("stores", ["run", str(a), "--store", str(s), "--no-progress"], "the same matrix again resumes",
                      oracle=meta_is(s, "matrix_text", a.read_text(encoding="utf-8")), extra=RUN_S))
    s = copy("more")
    cases.append(Case("stores", ["run", str(a_more), "--store", str(s), "--no-progress"], "the same matrix with one "
                      "concurrency more resumes", oracle=meta_is(s, "matrix_text", a_more.read_text(encoding="utf-8")),
                      extra=RUN_S))
    s = copy("forced")
    cases.append(Case("stores", ["run", str(b), "--store", str(s), "--no-progress", "--new-matrix"], "another "
                      "matrix with --new-matrix", oracle=meta_is(s, "name", "b"), extra=RUN_S))
    (d / "logsfile-logs").write_text("not a folder\n", encoding="utf-8")
    cases.append(Case("stores", ["run", str(a), "--store", str(d / "logsfile.db"), "--no-progress"],
                      "<store>-logs is a file", must_fail=True, extra=RUN_S))
    odd = Path(os.fsdecode(bytes(d) + b"/caf\xe9"))
    odd.mkdir()
    m = odd / "a.toml"  # its tokenizer stays outside: the tokenizers library takes no such path (load/, not here)
    shutil.copyfile(a, m)
    cases.append(Case("stores", ["run", str(m), "--store", str(odd / "s.db"), "--no-progress"], "a matrix in a folder "
                      "whose name is not UTF-8", oracle=exit_zero, extra=RUN_S))
    cases.append(Case("stores", ["run", str(m), "--dry-run", "--store", str(odd / "dry.db")], "dry run of a matrix in a "
                      "folder whose name is not UTF-8", oracle=exit_zero))
    cases.append(Case("stores", ["predict", str(m), "--json"], "predict a matrix in a folder whose name is not UTF-8",
                      oracle=exit_zero))
    odd_store = odd / "copy.db"
    shutil.copyfile(done, odd_store)
    for argv in (["report", str(odd_store), "--out", str(odd / "r")], ["export", str(odd_store), "-f", "json"],
                 ["calibrate", str(odd_store)], ["compare", str(odd_store), str(done), "--json"]):
        cases.append(Case("stores", argv, f"{argv[0]} of a store in a folder whose name is not UTF-8",
                          oracle=exit_zero, extra=REPORT_S))
    return cases


# ------------------------------------------------------------------------------------------------ report folders
def _synthetic(path: Path) -> Path:
    from specbench.testing.synthetic import write_store

    return write_store(path, tps=(1,), labels=("ar", "dflash"), concurrencies=(1, 2), failing_server=None,
                       failing_cell=None)


def report_written(out: Path, must_mention: str | None = None) -> Callable[[Result], str | None]:
    def oracle(res: Result) -> str | None:
        try:
            manifest = json.loads((out / ".specbench-report.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return f"no readable manifest after the report ({exc})"
        files = manifest.get("files") if isinstance(manifest, dict) else None
        if not isinstance(files, list) or "report.md" not in files:
            return "the manifest does not list report.md"
        if must_mention and must_mention not in (out / "report.md").read_text(encoding="utf-8"):
            return f"report.md does not say {must_mention!r}"
        return None
    return oracle


def report_cases(tmp: Path) -> list[Case]:
    d = tmp / "reports"
    d.mkdir(parents=True, exist_ok=True)
    store = _synthetic(d / "s.db")
    r = _cli("report", str(store), "--out", str(d / "full"))
    assert r.returncode == 0, r.stderr
    whole = (d / "full" / ".specbench-report.json").read_text(encoding="utf-8")
    cases: list[Case] = []
    states = {
        "manifest cut mid-write": whole[: len(whole) // 2],
        "manifest empty (killed right after it was opened)": "",
        "manifest cut after one file": whole[: whole.index('",') + 2],
    }
    for i, (what, body) in enumerate(states.items()):
        out = d / f"cut{i}"
        shutil.copytree(d / "full", out)
        (out / ".specbench-report.json").write_text(body, encoding="utf-8")
        cases.append(Case("reports", ["report", str(store), "--out", str(out)], what, oracle=report_written(out),
                          extra=REPORT_S))
    out = d / "lost"
    shutil.copytree(d / "full", out)
    (out / ".specbench-report.json").unlink()
    (out / "notes.txt").write_text("the user's own notes\n", encoding="utf-8")
    cases.append(Case("reports", ["report", str(store), "--out", str(out)], "no manifest and the user's own file: "
                      "refused", must_fail=True, extra=REPORT_S))
    out = d / "foreign"
    out.mkdir()
    (out / ".specbench-report.json").write_text('{"files": "everything"}', encoding="utf-8")
    cases.append(Case("reports", ["report", str(store), "--out", str(out)], "a whole manifest of another shape",
                      must_fail=True, extra=REPORT_S))
    return cases


# ------------------------------------------------------------------------------------------------ impossible metrics
METRIC_EDITS: tuple[tuple[str, str, bool], ...] = (
    # (what, SQL on the first speculative done cell, is the stored cell impossible?)
    ("0 completed on a done cell", "json_set(metrics_json, '$.completed', 0)", True),
    ("-3 completed on a done cell", "json_set(metrics_json, '$.completed', -3)", True),
    ("a negative output throughput", "json_set(metrics_json, '$.output_throughput', -120.5)", True),
    ("a negative request throughput", "json_set(metrics_json, '$.request_throughput', -0.5)", True),
    ("a negative total throughput", "json_set(metrics_json, '$.total_token_throughput', -1.0)", True),
    ("a negative TPOT", "json_set(metrics_json, '$.tpot_ms_mean', -4.0)", True),
    ("a negative TTFT p50", "json_set(metrics_json, '$.ttft_ms_p50', -4.0)", True),
    ("a negative duration", "json_set(metrics_json, '$.duration_s', -10.0)", True),
    ("an accept length below 1", "json_set(metrics_json, '$.accept_length_mean', 0.2)", True),
    ("completed as written", "metrics_json", False),
)


def _export_oracle(cell: str, damaged: bool) -> Callable[[Result], str | None]:
    def oracle(res: Result) -> str | None:
        rows = _json_out(res)
        row = next((r for r in rows if r.get("cell_id") == cell), None) if isinstance(rows, list) else None
        if row is None:
            return f"export lists no cell {cell}"
        if not damaged:
            return None if row.get("status") == "done" else f"a sound cell exported as {row.get('status')}"
        if row.get("status") != "damaged":
            return f"an impossible cell exported as {row.get('status')}"
        numbers = [k for k in ("metrics.output_throughput", "metrics.completed", "metrics.tpot_ms_mean")
                   if isinstance(row.get(k), (int, float))]
        return f"an impossible cell exported with numbers {numbers}" if numbers else None
    return oracle


def metric_cases(tmp: Path) -> list[Case]:
    d = tmp / "metrics"
    d.mkdir(parents=True, exist_ok=True)
    base = _synthetic(d / "base.db")
    cell = "cell-tp1-dflash-c1"
    cases: list[Case] = []
    for i, (what, expr, damaged) in enumerate(METRIC_EDITS):
        p = d / f"m{i}.db"
        shutil.copyfile(base, p)
        con = sqlite3.connect(p)
        try:
            con.execute(f"UPDATE cells SET metrics_json = {expr} WHERE cell_id = ?", (cell,))
            con.commit()
        finally:
            con.close()
        cases.append(Case("metrics", ["export", str(p), "-f", "json"], f"export: {what}",
                          oracle=_export_oracle(cell, damaged)))
        if i % 3 == 0 or not damaged:
            out = d / f"r{i}"
            cases.append(Case("metrics", ["report", str(p), "--out", str(out)], f"report: {what}",
                              oracle=report_written(out, "damaged" if damaged else None), extra=REPORT_S))
    return cases


def cases(tmp: Path) -> list[Case]:
    return [*kind_cases(tmp), *calibration_cases(tmp), *config_cases(tmp), *label_cases(tmp), *store_cases(tmp),
            *report_cases(tmp), *metric_cases(tmp)]
