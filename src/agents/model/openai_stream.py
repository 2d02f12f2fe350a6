"""What the chat-completions wire (`openai_http`) shares with the rest of the model package:
the JSON body encoder and the process's one TLS context.

The SDK encoded a body with the standard library's `json.dumps` (at 200 rounds 14 % of a run's
CPU); orjson writes the same compact UTF-8 JSON several times faster.
"""

from __future__ import annotations

import functools
import importlib
import json
import ssl
from collections.abc import Mapping
from typing import Any

import openai
import orjson


def dumps_body(body: Mapping[str, Any]) -> bytes:
    """`body` as the UTF-8 JSON the SDK would send (compact, non-ASCII kept, no NaN); the
    standard encoder takes over for what orjson refuses (an integer wider than 64 bits, a
    non-string key)."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


@functools.cache
def default_ssl_context() -> ssl.SSLContext | None:
    """The SSL context the SDK's HTTP client would build (certifi / SSL_CERT_FILE), made once
    per process: building it loads the CA bundle, ~45 ms, which every new client paid."""
    base = openai.DefaultAsyncHttpxClient.__mro__[1]  # httpx(2).AsyncClient
    module = importlib.import_module(base.__module__.split(".")[0])
    create = getattr(module, "create_ssl_context", None)
    return create() if create is not None else None
