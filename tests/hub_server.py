"""A stand-in for the Hugging Face Hub on 127.0.0.1: the file and range API as huggingface_hub 2.x calls it.

What huggingface_hub asks (read from .venv/.../huggingface_hub/file_download.py::get_hf_file_metadata,
hf_hub_download, hf_api.py::file_exists / parse_safetensors_file_metadata, utils/_http.py::hf_raise_for_status):
- `HEAD /{repo}/resolve/{revision}/{filename}`: 200 with `X-Repo-Commit` (the commit the revision points at),
  `ETag`, `Content-Length`, `Accept-Ranges`; a missing file is 404 with `X-Error-Code: EntryNotFound`, a missing
  repo 404 `RepoNotFound`, a missing revision 404 `RevisionNotFound`;
- `GET` of the same URL, whole, or a `Range: bytes=a-b` slice answered 206 (the safetensors header is read with
  `bytes=0-100000`, then `bytes=8-N` when the header is longer).
(huggingface_hub 2.4 also asks `GET /api/agent-harnesses`; a 404 is fine.) Every request is logged (method, path, range) so tests can assert what went over the wire.
"""

from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote


@dataclass
class Repo:
    refs: dict[str, str]                          # branch / tag -> commit
    files: dict[str, dict[str, bytes]]            # commit -> filename -> content


@dataclass
class FakeHub:
    repos: dict[str, Repo] = field(default_factory=dict)
    log: list[tuple[str, str, str | None]] = field(default_factory=list)

    def add(self, repo: str, files: dict[str, bytes], *, commit: str | None = None, ref: str = "main") -> str:
        digest = hashlib.sha1(repo.encode())
        for name in sorted(files):
            digest.update(name.encode() + b"\0" + files[name])
        commit = commit or digest.hexdigest()
        r = self.repos.setdefault(repo, Repo({}, {}))
        r.refs[ref] = commit
        r.files[commit] = dict(files)
        return commit


_RESOLVE = re.compile(r"^/(?P<repo>[^/]+/[^/]+)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):  # quiet
            pass

        def _error(self, code: str) -> None:
            self.send_response(404)
            self.send_header("X-Error-Code", code)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _serve(self, body: bool) -> None:
            path = self.path.split("?", 1)[0]
            hub.log.append((self.command, unquote(path), self.headers.get("Range")))
            m = _RESOLVE.match(path)
            if not m:
                return self._error("EntryNotFound")
            repo = hub.repos.get(unquote(m["repo"]))
            if repo is None:
                return self._error("RepoNotFound")
            rev = unquote(m["rev"])
            commit = repo.refs.get(rev, rev)
            files = repo.files.get(commit)
            if files is None:
                return self._error("RevisionNotFound")
            data = files.get(unquote(m["file"]))
            if data is None:
                return self._error("EntryNotFound")
            status, chunk = 200, data
            rng = self.headers.get("Range")
            if rng and body:
                a, _, b = rng.removeprefix("bytes=").partition("-")
                lo, hi = int(a), min(int(b) if b else len(data) - 1, len(data) - 1)
                status, chunk = 206, data[lo:hi + 1]
            self.send_response(status)
            self.send_header("X-Repo-Commit", commit)
            self.send_header("ETag", '"' + hashlib.sha1(data).hexdigest() + '"')
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Content-Length", str(len(chunk) if body else len(data)))
            if status == 206:
                self.send_header("Content-Range", f"bytes {lo}-{hi}/{len(data)}")
            self.end_headers()
            if body:
                self.wfile.write(chunk)

        def do_HEAD(self):  # noqa: N802
            self._serve(False)

        def do_GET(self):  # noqa: N802
            self._serve(True)

    return H


class HubServer:
    def __init__(self, hub: FakeHub):
        self.hub = hub
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> HubServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
