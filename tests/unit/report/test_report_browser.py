"""report.html in headless Chromium over the DevTools protocol: no errors, no network, every image decodes.

Needs the Debian `chromium` package (tools/ci/install_chromium.sh). Skipped when it is absent, unless
CI is set, where its absence is a failure.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from specbench.report.build import report_paths
from specbench.testing.synthetic import write_store

pytestmark = pytest.mark.browser

CHROMIUM = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--remote-debugging-port=0", "--window-size=1400,1000"]

PROBE = """(() => {
  const imgs = [...document.images];
  return JSON.stringify({
    title: document.title,
    tables: document.querySelectorAll('table').length,
    rows: document.querySelectorAll('tbody tr').length,
    images: imgs.length,
    decoded: imgs.filter(i => i.complete && i.naturalWidth > 0).length,
    state: (document.getElementById('state') || {}).textContent || null,
    height: document.body.scrollHeight,
    text: document.body.innerText.length,
  });
})()"""


@pytest.fixture(scope="module")
def chromium() -> str:
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (run tools/ci/install_chromium.sh)")
        pytest.skip("chromium is not installed; tools/ci/install_chromium.sh installs it")
    return CHROMIUM


async def _visit(chromium: str, url: str, profile: Path) -> dict[str, Any]:
    """Open url in a fresh headless Chromium; collect errors and non-local requests; run PROBE."""
    proc = await asyncio.create_subprocess_exec(chromium, *FLAGS, f"--user-data-dir={profile}", "about:blank",
                                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert proc.stderr is not None
        ws_url = None
        while ws_url is None:
            line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode(errors="replace")
            if not line:
                raise RuntimeError("chromium exited before DevTools listened")
            match = re.search(r"DevTools listening on (ws://\S+)", line)
            ws_url = match.group(1) if match else None
        port = re.search(r":(\d+)/", ws_url).group(1)  # type: ignore[union-attr]
        async with aiohttp.ClientSession() as http:
            targets = await (await http.get(f"http://127.0.0.1:{port}/json/list")).json()
            page = next(t for t in targets if t.get("type") == "page")
            async with http.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                return await _drive(ws, url)
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


async def _drive(ws: aiohttp.ClientWebSocketResponse, url: str) -> dict[str, Any]:
    errors: list[str] = []
    requests: list[str] = []
    ids = iter(range(1, 10_000))
    waiting: dict[int, asyncio.Future[Any]] = {}
    loaded = asyncio.get_running_loop().create_future()

    async def reader() -> None:
        async for msg in ws:
            data = json.loads(msg.data)
            if "id" in data and data["id"] in waiting:
                waiting.pop(data["id"]).set_result(data.get("result", data.get("error")))
            method, params = data.get("method"), data.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                errors.append(f"{details.get('text')}: {details.get('exception', {}).get('description')}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                errors.append(f"console.{params['type']}: {params.get('args')}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                errors.append(f"log: {params['entry'].get('text')} {params['entry'].get('url', '')}")
            elif method == "Network.requestWillBeSent":
                requests.append(params.get("request", {}).get("url", ""))
            elif method == "Page.loadEventFired" and not loaded.done():
                loaded.set_result(True)

    async def call(method: str, **params: Any) -> Any:
        i = next(ids)
        waiting[i] = asyncio.get_running_loop().create_future()
        await ws.send_str(json.dumps({"id": i, "method": method, "params": params}))
        return await asyncio.wait_for(waiting[i], 30)

    task = asyncio.create_task(reader())
    try:
        for domain in ("Runtime", "Log", "Network", "Page"):
            await call(f"{domain}.enable")
        await call("Page.navigate", url=url)
        await asyncio.wait_for(loaded, 60)
        await asyncio.sleep(0.3)  # late console messages
        result = await call("Runtime.evaluate", expression=PROBE, returnByValue=True)
        probe = json.loads(result["result"]["value"])
    finally:
        task.cancel()
    return {"errors": errors, "requests": requests, "probe": probe}


def _external(requests: list[str]) -> list[str]:
    return [u for u in requests if not u.startswith(("file://", "data:", "about:"))]


def test_report_html_renders_without_errors(chromium: str, tmp_path: Path) -> None:
    store = write_store(tmp_path / "night.db", tps=(1, 4))
    written = report_paths([store], tmp_path / "report")
    result = asyncio.run(_visit(chromium, written.html.as_uri(), tmp_path / "profile"))
    assert result["errors"] == []
    assert _external(result["requests"]) == []
    probe = result["probe"]
    assert probe["title"] == "specbench report: night"
    assert probe["images"] == len(written.pngs) == 10  # build.PNG_NAMES but the per-position figure (no counters)
    assert probe["decoded"] == probe["images"]  # every inlined PNG decodes in the browser
    assert probe["rows"] >= 40  # every cell has a row
    assert probe["state"].startswith("Partial")
    assert probe["height"] > 3000


def test_empty_report_renders_too(chromium: str, tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    written = report_paths([empty], tmp_path / "report")
    result = asyncio.run(_visit(chromium, written.html.as_uri(), tmp_path / "profile"))
    assert result["errors"] == [] and _external(result["requests"]) == []
    assert result["probe"]["state"].startswith("Empty")


def test_the_harness_sees_errors_and_network(chromium: str, tmp_path: Path) -> None:
    """The same harness on a broken page reports its script error, broken image and outside request."""
    page = tmp_path / "broken.html"
    page.write_text('<html><body><img src="missing.png"><img src="http://192.0.2.1/x.png">'
                    "<script>undefinedFunction()</script></body></html>")
    result = asyncio.run(_visit(chromium, page.as_uri(), tmp_path / "profile"))
    assert any("undefinedFunction" in e for e in result["errors"])
    assert any("missing.png" in e or "Failed to load" in e for e in result["errors"])
    assert _external(result["requests"]) == ["http://192.0.2.1/x.png"]
