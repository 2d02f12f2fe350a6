"""A scripted, OpenAI-compatible HTTP server for tests and offline demos.

Why a real HTTP server instead of mocking the client?  The code under test talks to
language models through the real ``openai.AsyncOpenAI`` client.  Mocking that client
(or patching its transport) would skip exactly the parts that break in practice:
request serialisation, SSE parsing, reassembly of streamed tool-call fragments, the
mapping of HTTP status codes to ``openai.APIStatusError`` subclasses, ``Retry-After``
handling, timeouts and cancellation of an in-flight stream.  ``ScriptedLLM`` therefore
listens on ``127.0.0.1`` (ephemeral port) and speaks the wire protocol of
``/v1/chat/completions`` itself, so tests point the real client at ``llm.base_url``.

The server uses only the standard library (``http.server.ThreadingHTTPServer`` running
in a daemon thread), so it works the same from sync and async tests: it never touches
the test's event loop.

Usage (``from artifactflow.testing import ScriptedLLM, Text, ToolCalls, Call``)::

    with ScriptedLLM() as llm:
        llm.script(Text("hello"), ToolCalls([Call("read_file", {"path": "a.txt"})]))
        client = openai.AsyncOpenAI(base_url=llm.base_url, api_key="test", max_retries=0)
        ...
        assert llm.request_count == 2
        assert not llm.unexpected

Responses are consumed one per request from a FIFO queue (``script``).  Functions
registered with ``route`` are consulted first and may answer based on the request body
(e.g. pick the answer by the agent's system message when several agents run
concurrently); returning ``None`` falls back to the queue.  When nothing answers, the
server replies HTTP 500 and records the request in ``llm.unexpected``.

Habits of real servers (llama-cpp-python, llama.cpp's ``llama-server``) are switched on with
``Quirks`` (see ``quirks``), for the whole server or for one response::

    llm = ScriptedLLM(quirks=LLAMA_CPP_PYTHON)
    llm.script(Text("cut short", quirks=Quirks(no_finish_reason=True)))

A request the quirky server refuses (``"content": null``, malformed tool-call arguments) is
answered with its HTTP error before any scripted response is consumed, and recorded in
``llm.refused``.

A small context window, the way real providers enforce one::

    llm = ScriptedLLM(context_window=8192, chars_per_token=3.0)

Every request is measured with ``request_tokens`` (this server's "tokenizer": characters of
contents, tool calls and tool schemas divided by ``chars_per_token``, plus a per-message
frame). Above the window the server answers HTTP 400 with OpenAI's
``context_length_exceeded`` body, without consuming a scripted response, and records the
figure in ``llm.rejected``; otherwise ``usage.prompt_tokens`` is that same figure and it is
recorded in ``llm.accepted_prompt_tokens``. ``request_sizes`` and ``request_times`` (body
bytes and arrival ``perf_counter``) are kept for benchmarks.

It also answers ``/v1/embeddings`` with deterministic word-hash vectors (``embeddings``), for
code that calls an OpenAI-compatible embeddings endpoint; ``embedding_requests`` and
``embedded_texts`` count them.

The parts, each in its own module: ``responses`` (what can be scripted), ``usage`` (token
figures and error bodies), ``script`` (the queue and the record, shared with the handler
threads), ``handler`` (the HTTP side); this module adds the server's lifetime.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .handler import ScriptServer
from .quirks import LLAMA_CPP_PYTHON, LLAMA_SERVER, Quirks
from .responses import (
    NO_RESPONSE_MESSAGE,
    Call,
    Delay,
    Error,
    Hang,
    Response,
    Route,
    Text,
    ToolCalls,
    Unexpected,
)
from .script import Script
from .usage import (
    MESSAGE_FRAME_TOKENS,
    completion_tokens,
    context_length_body,
    prompt_tokens,
    request_tokens,
)

__all__ = [
    "MESSAGE_FRAME_TOKENS",
    "NO_RESPONSE_MESSAGE",
    "Call",
    "Delay",
    "Error",
    "Hang",
    "LLAMA_CPP_PYTHON",
    "LLAMA_SERVER",
    "Quirks",
    "Response",
    "Route",
    "ScriptedLLM",
    "Text",
    "ToolCalls",
    "Unexpected",
    "completion_tokens",
    "context_length_body",
    "prompt_tokens",
    "request_tokens",
    "scripted_llm",
]

_Server = ScriptServer  # benchmarks/concurrency.py raises its backlog under this name


class ScriptedLLM(Script):
    """Scripted OpenAI-compatible server on 127.0.0.1 (see module docstring)."""

    _server: ScriptServer | None = None  # set by start()
    _thread: threading.Thread | None = None

    # ---- lifecycle

    def start(self) -> ScriptedLLM:
        """Bind to 127.0.0.1:0 and serve in a daemon thread (idempotent)."""
        with self._lock:
            if self._server is not None:
                return self
            if self._stop.is_set():
                raise RuntimeError("ScriptedLLM cannot be restarted after close()")
            self._server = ScriptServer(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"ScriptedLLM:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self, timeout: float = 2.0) -> None:
        """Stop serving; interrupts Delay/Hang/slow streams; returns within ~timeout."""
        if self._stop.is_set():
            return
        self._stop.set()
        server, thread = self._server, self._thread
        if server is None:
            return
        deadline = time.monotonic() + timeout
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._idle:
            while self._active and time.monotonic() < deadline:
                self._idle.wait(max(0.0, min(0.05, deadline - time.monotonic())))

    def __enter__(self) -> ScriptedLLM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._stop.is_set()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("ScriptedLLM is not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """e.g. ``http://127.0.0.1:PORT/v1`` (starts the server if needed)."""
        if self._server is None:
            self.start()
        return f"http://127.0.0.1:{self.port}/v1"


@contextmanager
def scripted_llm(
    *responses: Response, models: list[str] | None = None, **options: Any
) -> Iterator[ScriptedLLM]:
    """``with scripted_llm(Text("hi")) as llm: ...`` — starts and always closes the server."""
    llm = ScriptedLLM(*responses, models=models, **options)
    with llm:
        yield llm
