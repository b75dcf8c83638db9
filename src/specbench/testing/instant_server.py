"""A minimal OpenAI-compatible streaming server that answers instantly (a test and benchmark fixture).

It stands in for an engine only where the *client* is what is measured or tested: stdlib asyncio, one
process, HTTP/1.1 keep-alive, chunked SSE exactly as uvicorn frames it (one chunk per event).

Endpoints: `POST /v1/completions`, `POST /v1/chat/completions` (stream and not), SGLang-style
`POST /generate` (stream: cumulative `text` + `meta_info` with `completion_tokens`, `spec_verify_ct`),
`GET /health`, `GET /v1/models`, `GET /metrics` (vLLM-named counters, spec-decode ones included),
`GET /get_server_info`.

Every request gets exactly `max_tokens` output tokens (one word each, from instant_bodies.WORDS) unless `--max-output`
caps it. `--accept-length A` simulates speculative decoding: each event carries A tokens, one verify step
per event. `--burst N` puts N events in one socket write; `--ttft-ms` / `--itl-ms` pace the stream.
Failure injection for tests: `--fail-every K` (HTTP 500), `--close-every K` (connection dropped
mid-stream), `--error-event-every K` (an SSE `{"error": ...}` event mid-stream, as vLLM sends); a misbehaving
server: `--malformed-every K` (an event that is not JSON mid-stream), `--truncate-every K` (the stream ends cleanly
at the HTTP level without `[DONE]`, after half its events), `--stall-every K` (the stream stops after half its events
and the connection stays open), `--no-usage` (no usage chunk even when asked). `--api-key KEY` is taken and echoed
in the startup line, as SGLang prints its server_args (tests check that no copy of it is kept).
`return_token_ids` in a request (vLLM's field) puts each choice's `token_ids` in the stream, and `/generate` streams
SGLang's cumulative `output_ids`. Ground truth: `--step-ms` turns on a batch scheduler with a known step time (plus
`--step-ms-per-running` per request running in the step: throughput saturates), cap (`--max-running`) and per-position
acceptance (`--accept-rates`), and the lies `--usage-scale`, `--usage-offset`,
`--early-eos`, `--models-name`, `--report-cap` (instant_truth.py).
`--json-style compact|spaces|loose` spells the stream's JSON as both engines do (compact, the default), as Python's
`json.dumps` does by default (`--json-spaces`, FastChat-style servers), or every other way JSON allows at once
(instant_bodies.JSON_STYLES): the client must measure all three alike.
`--record FILE` appends every POST body it receives to FILE, one `{"path": ..., "body": ...}` JSON line each
(tests read what the client really sent). What it sends, as bytes: `instant_bodies.py`; the fault modes:
`instant_faults.py`; the socket side: `instant_http.py`; the knobs, one frozen value: `instant_options.py`; this
module is the command line.

    python -m specbench.testing.instant_server --port 0 --burst 16    # prints "READY <port>"
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from specbench.testing.instant_bodies import JSON_STYLES
from specbench.testing.instant_http import serve
from specbench.testing.instant_options import Options


def parse_args(argv: list[str] | None = None) -> tuple[str, int, Options]:
    p = argparse.ArgumentParser(prog="python -m specbench.testing.instant_server", description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port; the line 'READY <port>' tells which")
    p.add_argument("--burst", type=int, default=16, help="SSE events per socket write (default 16)")
    p.add_argument("--ttft-ms", type=float, default=0.0)
    p.add_argument("--itl-ms", type=float, default=0.0, help="delay between bursts")
    p.add_argument("--max-output", type=int, default=None, help="cap on output tokens per request")
    p.add_argument("--default-output", type=int, default=16, help="output tokens when max_tokens is absent")
    p.add_argument("--accept-length", type=int, default=1, help="tokens per event (simulated verify step)")
    p.add_argument("--num-spec-tokens", type=int, default=3, help="draft tokens per verify step, for /metrics")
    p.add_argument("--fail-every", type=int, default=0)
    p.add_argument("--close-every", type=int, default=0)
    p.add_argument("--error-event-every", type=int, default=0)
    p.add_argument("--malformed-every", type=int, default=0, help="a non-JSON event mid-stream every K requests")
    p.add_argument("--truncate-every", type=int, default=0, help="end the stream without [DONE] every K requests")
    p.add_argument("--stall-every", type=int, default=0, help="stop the stream half-way every K requests")
    p.add_argument("--no-usage", action="store_true", help="never send the usage chunk")
    p.add_argument("--api-key", default=None, help="taken and echoed at startup (as SGLang prints server_args)")
    p.add_argument("--enforce-api-key", action="store_true", help="answer 401 without `Authorization: Bearer KEY`")
    p.add_argument("--model", default="instant")
    p.add_argument("--record", default=None, help="append every POST body received to this file (JSON lines)")
    p.add_argument("--json-style", choices=JSON_STYLES, default="compact",
                   help="how the stream's JSON is spelled: compact (as the engines), spaces (Python's json.dumps "
                        "default), loose (every other spelling at once)")
    p.add_argument("--json-spaces", action="store_const", const="spaces", dest="json_style",
                   help="= --json-style spaces")
    t = p.add_argument_group("ground truth (instant_truth.py)")
    t.add_argument("--step-ms", type=float, default=0.0, help="a batch scheduler whose every step takes this long")
    t.add_argument("--step-ms-per-running", type=float, default=0.0,
                   help="each step takes this much longer per request running in it (throughput saturates)")
    t.add_argument("--max-running", type=int, default=1 << 30, help="requests generating at once (the rest wait)")
    t.add_argument("--accept-rates", default="", help="per draft position acceptance, e.g. 0.8,0.6,0.4")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--metrics", choices=("vllm", "sglang"), default="vllm", help="whose counters /metrics shows")
    t.add_argument("--usage-scale", type=float, default=1.0, help="lie: reported completion_tokens x F")
    t.add_argument("--usage-offset", type=int, default=0, help="lie: reported completion_tokens + K")
    t.add_argument("--early-eos", type=float, default=None, help="lie: stop after F x max_tokens despite ignore_eos")
    t.add_argument("--models-name", default=None, help="lie: /v1/models names this model instead of --model")
    t.add_argument("--report-cap", type=int, default=None, help="lie: /server_info reports this cap")
    t.add_argument("--accepted-scale", type=float, default=1.0,
                   help="lie: /metrics shows the accepted draft tokens x F (vLLM counters)")
    t.add_argument("--answer-model", default=None, help="lie: every answer names this model")
    t.add_argument("--switch-model", default=None, help="lie: after --switch-after answers, serve this model")
    t.add_argument("--switch-after", type=int, default=0)
    t.add_argument("--same-answer", action="store_true", help="lie: one answer for every prompt (a cache, a stub)")
    t.add_argument("--prompt-tokens-lie", type=int, default=None, help="lie: report this many prompt tokens")
    t.add_argument("--empty-events", action="store_true", help="an event without text between every two tokens")
    t.add_argument("--truth-file", default=None, help="write what the scheduler really did here after each request")
    a = p.parse_args(argv)
    if a.burst < 1 or a.accept_length < 1:
        p.error("--burst and --accept-length must be >= 1")
    opts = Options(burst=a.burst, ttft_ms=a.ttft_ms, itl_ms=a.itl_ms, max_output=a.max_output,
                   default_output=a.default_output, accept_length=a.accept_length, num_spec_tokens=a.num_spec_tokens,
                   fail_every=a.fail_every, close_every=a.close_every, error_event_every=a.error_event_every,
                   malformed_every=a.malformed_every, truncate_every=a.truncate_every, stall_every=a.stall_every,
                   no_usage=a.no_usage, model=a.model, record=a.record, step_ms=a.step_ms, max_running=a.max_running,
                   step_ms_per_running=a.step_ms_per_running,
                   accept_rates=tuple(float(x) for x in a.accept_rates.split(",") if x.strip()), seed=a.seed,
                   metrics=a.metrics, usage_scale=a.usage_scale, usage_offset=a.usage_offset, early_eos=a.early_eos,
                   models_name=a.models_name, report_cap=a.report_cap, truth_file=a.truth_file,
                   accepted_scale=a.accepted_scale, json_style=a.json_style,
                   require_key=a.api_key if a.enforce_api_key else None, answer_model=a.answer_model,
                   switch_model=a.switch_model, switch_after=a.switch_after, same_answer=a.same_answer,
                   prompt_tokens_lie=a.prompt_tokens_lie, empty_events=a.empty_events)
    if a.api_key is not None:
        print(f"server_args=ServerArgs(model_path={a.model!r}, api_key={a.api_key!r}, port={a.port})", flush=True)
    return a.host, a.port, opts


def main(argv: list[str] | None = None) -> None:
    host, port, opts = parse_args(argv)
    if os.environ.get("SPECBENCH_UVLOOP") == "1":
        try:
            import uvloop  # type: ignore[import-not-found]

            uvloop.install()
        except ImportError:
            pass
    try:
        asyncio.run(serve(host, port, opts))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
