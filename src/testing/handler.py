"""The HTTP side of `ScriptedLLM`: turn a request into the scripted response, on the wire.

One handler thread per request (``ThreadingHTTPServer``, HTTP/1.0 so there are no idle
keep-alive connections to reap on close). A chat request is recorded, measured against the
context window, checked against the server's quirks, and only then answered from the
`Script`; a streamed answer is written as OpenAI's SSE chunks, with tool-call arguments in
fragments, pausing between chunks in sleeps that ``close()`` interrupts. A client that goes
away mid-answer is counted (``disconnects``), never raised.
"""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, cast

from .embeddings import embeddings_body
from .quirks import Quirks, argument_delta, request_refusal, streams_nothing
from .responses import (
    NO_RESPONSE_MESSAGE,
    Delay,
    Error,
    Hang,
    Response,
    Text,
    ToolCalls,
    Unexpected,
)
from .script import Script
from .usage import completion_tokens, context_length_body, error_body, prompt_tokens, request_tokens


def _chunks(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)]


class _ClientGone(Exception):
    """The client disconnected while we were writing."""


class ScriptServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, llm: Script) -> None:
        self.llm = llm
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.0: one request per connection, body delimited by close for streams.
    # This keeps close() simple (no idle keep-alive connections to reap).
    protocol_version = "HTTP/1.0"
    server_version = "ScriptedLLM/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # ---- plumbing

    @property
    def llm(self) -> Script:
        return cast(ScriptServer, self.server).llm

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

    def _reset(self) -> None:
        """Drop the connection with a TCP RST (linger 0), not an orderly close."""
        self.wfile.flush()
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()

    def _send_error(self, status: int, message: str) -> None:
        self._send_json(status, error_body(status, message))

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
        if path == "/v1/embeddings":
            self._embeddings(raw)
            return
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

    def _embeddings(self, raw: bytes) -> None:
        try:
            body = embeddings_body(json.loads(raw or b"{}"), self.llm.embedding_dims)
        except (ValueError, TypeError, AttributeError) as exc:
            self._send_error(400, f"ScriptedLLM: invalid embeddings request: {exc}")
            return
        self.llm._record_embeddings(len(body["data"]))
        self._send_json(200, body)

    def _refuse(self, quirks: Quirks, body: dict[str, Any]) -> bool:
        refusal = request_refusal(quirks, body)
        if refusal is None:
            return False
        status, message = refusal
        self.llm._record_refused(message)
        self._send_json(
            status, {"error": {"code": status, "message": message, "type": "server_error"}}
        )
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
                error_body(response.status, response.message, response.type, response.code),
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
        reset_after = response.reset_after if isinstance(response, Text) else None
        for index, piece in enumerate(_chunks(text, response.chunk_size)):
            if index == reset_after:
                self._reset()
                return
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
