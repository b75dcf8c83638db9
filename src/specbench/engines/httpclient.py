"""The control-plane HTTP client (readiness, /v1/models, /metrics, cache resets, server info): `httpx.Client` with one
verifying TLS context per process.

httpx builds a new `ssl.SSLContext` for every Client and reads the whole CA bundle into it (httpx/_config.py::
create_ssl_context@0.29: certifi's bundle, or $SSL_CERT_FILE / $SSL_CERT_DIR when the client trusts the environment):
60 ms of CPU each on a 2-core VM, 14 clients in a two-server `specbench run` against local servers that never use TLS
(measured with cProfile: 0.85 s of a 2.7 s run). The context is the same for every client, so it is built once, the
first time one is asked for, and shared (an SSLContext is made to be shared); verification is unchanged.
"""

from __future__ import annotations

import functools
import ssl
from typing import Any

import httpx


@functools.cache
def tls_context(trust_env: bool) -> ssl.SSLContext:
    """httpx's own default context for a client with this `trust_env` (the environment's CA settings or certifi's)."""
    return httpx.create_ssl_context(trust_env=trust_env)


def client(*, trust_env: bool = True, **kw: Any) -> httpx.Client:
    """`httpx.Client(**kw)` with the shared context for its `trust_env`."""
    return httpx.Client(verify=tls_context(trust_env), trust_env=trust_env, **kw)
