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
"""

from __future__ import annotations

import itertools
import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from .quirks import (
    LLAMA_CPP_PYTHON,
    LLAMA_SERVER,
    NO_QUIRKS,
    Quirks,
    argument_delta,
    request_refusal,
    streams_nothing,
)

__all__ = [
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

NO_RESPONSE_MESSAGE = "ScriptedLLM: no scripted response left"
_STEP = 0.05  # max wait per step of interruptible sleeps (close() wakes them at once)


# --------------------------------------------------------------------------- responses


@dataclass
class Text:
    """Assistant text; streamed in pieces of ``chunk_size`` characters, finish_reason "stop".

    ``chunk_delay`` sleeps between streamed chunks (to test cancellation mid-stream or
    attaching to a run while it is producing output). ``quirks`` add server habits to this
    response only.
    """

    content: str
    chunk_size: int = 8
    chunk_delay: float = 0.0
    quirks: Quirks | None = None
    finish_reason: str = "stop"  # "length": the answer was cut off by max_tokens


@dataclass
class Call:
    """One tool call.  A ``str`` ``arguments`` is sent verbatim (may be malformed JSON)."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass
class ToolCalls:
    """Assistant tool calls (optionally preceded by ``content``), finish_reason "tool_calls".

    Arguments are streamed in fragments of ``chunk_size`` characters, like OpenAI does.
    """

    calls: list[Call]
    content: str = ""
    chunk_size: int = 8
    chunk_delay: float = 0.0
    quirks: Quirks | None = None
    finish_reason: str = "tool_calls"


@dataclass
class Error:
    """An HTTP error with an OpenAI-style JSON body (and ``Retry-After`` when given)."""

    status: int
    message: str = "ScriptedLLM: scripted error"
    retry_after: float | None = None
    type: str | None = None
    code: str | None = None


@dataclass
class Delay:
    """Sleep ``seconds`` (interruptible by ``close()``) and then answer with ``then``."""

    seconds: float
    then: Response


@dataclass
class Hang:
    """Never answer; the connection is dropped when the server closes."""


Response = Text | ToolCalls | Error | Delay | Hang
Route = Callable[[dict[str, Any]], "Response | None"]


@dataclass
class Unexpected:
    """A request the server could not answer from its script."""

    path: str
    reason: str
    request: dict[str, Any] | None = None


_ERROR_TYPES: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "model_not_found"),
    409: ("conflict_error", None),
    422: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
}


def _error_body(
    status: int, message: str, type_: str | None = None, code: str | None = None
) -> dict[str, Any]:
    default_type, default_code = _ERROR_TYPES.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    return {
        "error": {
            "message": message,
            "type": type_ or default_type,
            "param": None,
            "code": code if code is not None else default_code,
        }
    }


def _chunks(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


def _content_chars(content: Any) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        total = 0
        for part in content:
            if isinstance(part, dict):
                text = part.get("text")
                if isinstance(text, str):
                    total += len(text)
            elif isinstance(part, str):
                total += len(part)
        return total
    return len(str(content))


def prompt_tokens(request: dict[str, Any]) -> int:
    """Deterministic prompt usage: characters of all message contents // 4 (min 1)."""
    messages = request.get("messages") or []
    chars = sum(_content_chars(m.get("content")) for m in messages if isinstance(m, dict))
    return max(1, chars // 4)


MESSAGE_FRAME_TOKENS = 3


def request_tokens(request: dict[str, Any], chars_per_token: float = 4.0) -> int:
    """The windowed server's prompt figure: message contents, tool-call names and arguments,
    tool-call ids and the tools' JSON, in characters / ``chars_per_token`` (rounded up), plus
    ``MESSAGE_FRAME_TOKENS`` per message."""
    chars = 0
    frames = 0
    for message in request.get("messages") or []:
        if not isinstance(message, dict):
            continue
        frames += 1
        chars += _content_chars(message.get("content"))
        chars += len(str(message.get("tool_call_id") or ""))
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            chars += len(str(function.get("name") or "")) + len(str(function.get("arguments") or ""))
            chars += len(str(call.get("id") or ""))
    if request.get("tools"):
        chars += len(json.dumps(request["tools"], separators=(",", ":")))
    return math.ceil(chars / chars_per_token) + frames * MESSAGE_FRAME_TOKENS


def context_length_body(window: int, prompt: int, completion: int = 0) -> dict[str, Any]:
    """OpenAI's 400 body for a request over the window (wording as the API sends it)."""
    if completion:
        message = (
            f"This model's maximum context length is {window} tokens. However, you requested "
            f"{prompt + completion} tokens ({prompt} in the messages, {completion} in the "
            "completion). Please reduce the length of the messages or completion."
        )
    else:
        message = (
            f"This model's maximum context length is {window} tokens. However, your messages "
            f"resulted in {prompt} tokens. Please reduce the length of the messages."
        )
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


def completion_tokens(text: str, arguments: list[str]) -> int:
    """Deterministic completion usage: len(text + all tool-call arguments) // 4 (min 1)."""
    return max(1, (len(text) + sum(len(a) for a in arguments)) // 4)


# --------------------------------------------------------------------------- server


class _ClientGone(Exception):
    """The client disconnected while we were writing."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, llm: ScriptedLLM) -> None:
        self.llm = llm
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.0: one request per connection, body delimited by close for streams.
    # This keeps close() simple (no idle keep-alive connections to reap).
    protocol_version = "HTTP/1.0"
    server: _Server
    server_version = "ScriptedLLM/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # ---- plumbing

    @property
    def llm(self) -> ScriptedLLM:
        return self.server.llm

    def _write(self, data: bytes) -> None:
        try:
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, OSError) as exc:
            raise _ClientGone() from exc

    def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
        except OSError as exc:
            raise _ClientGone() from exc
        self._write(data)

    def _send_error(self, status: int, message: str) -> None:
        self._send_json(status, _error_body(status, message))

    def _run(self, fn: Callable[[], None]) -> None:
        self.llm._enter()
        try:
            fn()
        except _ClientGone:
            self.llm._note_disconnect()
        finally:
            self.llm._leave()

    # ---- routes

    def do_GET(self) -> None:
        self._run(self._get)

    def do_POST(self) -> None:
        self._run(self._post)

    def _get(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if path == "/v1/models":
            self._send_json(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": m, "object": "model", "created": 0, "owned_by": "scripted-llm"}
                        for m in self.llm.models
                    ],
                },
            )
            return
        self.llm._record_unexpected(Unexpected(self.path, f"unknown path GET {self.path}"))
        self._send_error(404, f"ScriptedLLM: unknown path GET {self.path}")

    def _post(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if path != "/v1/chat/completions":
            self.llm._record_unexpected(Unexpected(self.path, f"unknown path POST {self.path}"))
            self._send_error(404, f"ScriptedLLM: unknown path POST {self.path}")
            return
        try:
            body = json.loads(raw or b"{}")
            if not isinstance(body, dict):
                raise ValueError("request body is not a JSON object")
        except ValueError as exc:
            self.llm._record_unexpected(Unexpected(self.path, f"invalid JSON body: {exc}"))
            self._send_error(400, f"ScriptedLLM: invalid JSON body: {exc}")
            return

        self.llm._record_request(body, {k.lower(): v for k, v in self.headers.items()}, len(raw))
        window = self.llm.context_window
        if window is not None:
            prompt = request_tokens(body, self.llm.chars_per_token)
            completion = int(body.get("max_completion_tokens") or body.get("max_tokens") or 0)
            if prompt + completion > window:
                self.llm._record_rejected(prompt)
                self._send_json(400, context_length_body(window, prompt, completion))
                return
            self.llm._record_accepted(prompt)
        if self._refuse(self.llm.quirks, body):
            return
        response = self.llm._next_response(body)
        if response is None:
            self._send_error(500, NO_RESPONSE_MESSAGE)
            return
        if isinstance(response, Text | ToolCalls) and response.quirks:
            if self._refuse(response.quirks, body):
                return
        self._answer(body, response)

    def _refuse(self, quirks: Quirks, body: dict[str, Any]) -> bool:
        refusal = request_refusal(quirks, body)
        if refusal is None:
            return False
        status, message = refusal
        self.llm._record_refused(message)
        self._send_json(status, {"error": {"code": status, "message": message, "type": "server_error"}})
        return True

    # ---- answering

    def _sleep(self, seconds: float) -> bool:
        """Interruptible sleep; False if the server is stopping."""
        return self.llm._sleep(seconds)

    def _answer(self, request: dict[str, Any], response: Response) -> None:
        while isinstance(response, Delay):
            if not self._sleep(response.seconds):
                return
            response = response.then
        if isinstance(response, Hang):
            self._sleep(float("inf"))
            return  # server closing: drop the connection without answering
        if isinstance(response, Error):
            headers: dict[str, str] = {}
            if response.retry_after is not None:
                ra = response.retry_after
                headers["Retry-After"] = str(int(ra)) if float(ra).is_integer() else str(ra)
            self._send_json(
                response.status,
                _error_body(response.status, response.message, response.type, response.code),
                headers,
            )
            return
        if isinstance(response, Text | ToolCalls):
            if request.get("stream"):
                self._stream(request, response)
            else:
                self._complete(request, response)
            return
        self.llm._record_unexpected(
            Unexpected(self.path, f"not a response object: {response!r}", request)
        )
        self._send_error(500, f"ScriptedLLM: not a response object: {response!r}")

    def _tool_calls(self, response: ToolCalls) -> list[tuple[str, str, str]]:
        out = []
        for call in response.calls:
            args = call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
            out.append((call.id or self.llm._new_call_id(), call.name, args))
        return out

    def _usage(self, request: dict[str, Any], text: str, args: list[str]) -> dict[str, int]:
        if self.llm.context_window is not None:
            p = request_tokens(request, self.llm.chars_per_token)
        else:
            p = prompt_tokens(request)
        c = completion_tokens(text, args)
        return {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}

    def _complete(self, request: dict[str, Any], response: Text | ToolCalls) -> None:
        quirks = self.llm.quirks | response.quirks
        message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
        args: list[str] = []
        if isinstance(response, Text):
            message["content"] = response.content
            text, finish = response.content, response.finish_reason
        else:
            calls = self._tool_calls(response)
            args = [a for _, _, a in calls]
            message["content"] = response.content or None
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": a}}
                for cid, name, a in calls
            ]
            text, finish = response.content, response.finish_reason
        body: dict[str, Any] = {
            "id": self.llm._new_completion_id(),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model") or self.llm.models[0],
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": None if quirks.no_finish_reason else finish,
                    "logprobs": None,
                }
            ],
        }
        if not quirks.no_usage:
            body["usage"] = self._usage(request, text, args)
        self._send_json(200, body)

    def _stream(self, request: dict[str, Any], response: Text | ToolCalls) -> None:
        quirks = self.llm.quirks | response.quirks
        include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
        include_usage = include_usage and not quirks.no_usage
        completion_id = self.llm._new_completion_id()
        created = int(time.time())
        model = request.get("model") or self.llm.models[0]

        try:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.flush()
        except OSError as exc:
            raise _ClientGone() from exc
        if streams_nothing(quirks, request):
            return  # HTTP 200 and an empty body: the stream ends before any chunk

        def chunk(
            delta: dict[str, Any] | None,
            finish: str | None = None,
            usage: dict[str, int] | None = None,
        ) -> None:
            payload: dict[str, Any] = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": None,
                "choices": []
                if delta is None
                else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }
            if include_usage:
                payload["usage"] = usage
            self._write(b"data: " + json.dumps(payload).encode() + b"\n\n")

        delay = response.chunk_delay

        def pause() -> bool:
            return not delay or self._sleep(delay)

        chunk({"role": "assistant", "content": "", "refusal": None})
        args: list[str] = []
        text = response.content
        for piece in _chunks(text, response.chunk_size):
            if not pause():
                return
            chunk({"content": piece})
        finish = response.finish_reason
        if isinstance(response, ToolCalls):
            for index, (cid, name, arguments) in enumerate(self._tool_calls(response)):
                args.append(arguments)
                if not pause():
                    return
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": cid,
                                "type": "function",
                                "function": {"name": name, "arguments": ""},
                            }
                        ]
                    }
                )
                for fragment in _chunks(arguments, response.chunk_size):
                    if not pause():
                        return
                    chunk(argument_delta(quirks, index, cid, name, fragment))
        if not pause():
            return
        if not quirks.no_finish_reason:
            chunk({}, finish)
        if include_usage:
            chunk(None, usage=self._usage(request, text, args))
        self._write(b"data: [DONE]\n\n")


# --------------------------------------------------------------------------- public object


class ScriptedLLM:
    """Scripted OpenAI-compatible server on 127.0.0.1 (see module docstring)."""

    def __init__(
        self,
        *responses: Response,
        models: list[str] | None = None,
        context_window: int | None = None,
        chars_per_token: float = 4.0,
        quirks: Quirks = NO_QUIRKS,
    ) -> None:
        self.models: list[str] = list(models or ["scripted-model"])
        self.quirks = quirks  # may be changed between requests
        self._refused: list[str] = []
        self.context_window = context_window
        self.chars_per_token = chars_per_token
        self._rejected: list[int] = []
        self._accepted: list[int] = []
        self._sizes: list[int] = []
        self._times: list[float] = []
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._active = 0
        self._stop = threading.Event()
        self._queue: deque[Response] = deque(responses)
        self._routes: list[Route] = []
        self._requests: list[dict[str, Any]] = []
        self._headers: list[dict[str, str]] = []
        self._unexpected: list[Unexpected] = []
        self._disconnects = 0
        self._call_ids = itertools.count(1)
        self._completion_ids = itertools.count(1)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ---- lifecycle

    def start(self) -> ScriptedLLM:
        """Bind to 127.0.0.1:0 and serve in a daemon thread (idempotent)."""
        with self._lock:
            if self._server is not None:
                return self
            if self._stop.is_set():
                raise RuntimeError("ScriptedLLM cannot be restarted after close()")
            self._server = _Server(self)
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

    # ---- scripting

    def script(self, *responses: Response) -> ScriptedLLM:
        """Append responses to the FIFO queue (one consumed per chat request)."""
        with self._lock:
            self._queue.extend(responses)
        return self

    def route(self, fn: Route) -> Route:
        """Register ``fn(request_json) -> Response | None``, consulted before the queue.

        Routes are tried in registration order; the first non-None answer wins.
        Usable as a decorator.
        """
        with self._lock:
            self._routes.append(fn)
        return fn

    def clear_routes(self) -> None:
        with self._lock:
            self._routes.clear()

    @property
    def remaining(self) -> int:
        """Number of queued responses not yet consumed."""
        with self._lock:
            return len(self._queue)

    # ---- inspection

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Every chat request body (parsed JSON), in arrival order (a snapshot copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """Headers (lower-cased names) of each chat request, parallel to ``requests``."""
        with self._lock:
            return list(self._headers)

    @property
    def last_request(self) -> dict[str, Any] | None:
        with self._lock:
            return self._requests[-1] if self._requests else None

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self._requests)

    @property
    def unexpected(self) -> list[Unexpected]:
        """Requests nothing answered (empty queue, bad path, failing route...)."""
        with self._lock:
            return list(self._unexpected)

    @property
    def rejected(self) -> list[int]:
        """Prompt figures of the requests refused as over ``context_window``."""
        with self._lock:
            return list(self._rejected)

    @property
    def accepted_prompt_tokens(self) -> list[int]:
        """Prompt figures of the requests within ``context_window``, in arrival order."""
        with self._lock:
            return list(self._accepted)

    @property
    def request_sizes(self) -> list[int]:
        """Body bytes of each chat request, parallel to ``requests``."""
        with self._lock:
            return list(self._sizes)

    @property
    def request_times(self) -> list[float]:
        """``time.perf_counter()`` at each chat request's arrival, parallel to ``requests``."""
        with self._lock:
            return list(self._times)

    @property
    def refused(self) -> list[str]:
        """Error messages of the requests refused because of ``quirks`` (null content, …)."""
        with self._lock:
            return list(self._refused)

    @property
    def disconnects(self) -> int:
        """How many responses were cut short because the client went away."""
        with self._lock:
            return self._disconnects

    # ---- used by the handler threads

    def _record_request(self, body: dict[str, Any], headers: dict[str, str], size: int = 0) -> None:
        with self._lock:
            self._requests.append(body)
            self._headers.append(headers)
            self._sizes.append(size)
            self._times.append(time.perf_counter())

    def _record_rejected(self, prompt: int) -> None:
        with self._lock:
            self._rejected.append(prompt)

    def _record_accepted(self, prompt: int) -> None:
        with self._lock:
            self._accepted.append(prompt)

    def _record_refused(self, message: str) -> None:
        with self._lock:
            self._refused.append(message)

    def _record_unexpected(self, item: Unexpected) -> None:
        with self._lock:
            self._unexpected.append(item)

    def _note_disconnect(self) -> None:
        with self._lock:
            self._disconnects += 1

    def _next_response(self, body: dict[str, Any]) -> Response | None:
        with self._lock:
            routes = list(self._routes)
        for fn in routes:
            try:
                answer = fn(body)
            except Exception as exc:  # a broken route must not kill the handler silently
                self._record_unexpected(
                    Unexpected("/v1/chat/completions", f"route {fn!r} raised {exc!r}", body)
                )
                return Error(500, f"ScriptedLLM: route raised {exc!r}")
            if answer is not None:
                return answer
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            self._unexpected.append(Unexpected("/v1/chat/completions", NO_RESPONSE_MESSAGE, body))
        return None

    def _new_call_id(self) -> str:
        with self._lock:
            return f"call_{next(self._call_ids)}"

    def _new_completion_id(self) -> str:
        with self._lock:
            return f"chatcmpl-scripted-{next(self._completion_ids)}"

    def _sleep(self, seconds: float) -> bool:
        """Sleep in small steps; False as soon as the server is closing."""
        deadline = time.monotonic() + seconds
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            self._stop.wait(min(_STEP, left))  # set() wakes this early
        return False

    def _enter(self) -> None:
        with self._lock:
            self._active += 1

    def _leave(self) -> None:
        with self._idle:
            self._active -= 1
            self._idle.notify_all()


@contextmanager
def scripted_llm(
    *responses: Response, models: list[str] | None = None, **options: Any
) -> Iterator[ScriptedLLM]:
    """``with scripted_llm(Text("hi")) as llm: ...`` — starts and always closes the server."""
    llm = ScriptedLLM(*responses, models=models, **options)
    with llm:
        yield llm
