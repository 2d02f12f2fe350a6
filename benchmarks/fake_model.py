"""A fake OpenAI-compatible chat-completions server on raw asyncio, for the peers benchmark.

Why not `artifactflow.testing.ScriptedLLM`? That server opens a thread and a new TCP
connection per request (HTTP/1.0) and lives in the caller's process, so its own cost would be
counted as the client's CPU and would dominate the floor. This one is HTTP/1.1 with keep-alive,
runs in its own process (`python benchmarks/fake_model.py`, which prints its base URL), and
does as little as possible per request, so what the benchmark measures is the peer.

The script: the first user message says "Read pages 1 to N."; while the request carries fewer
than N tool results the answer is one `fetch_page` call for the next page, then the text
"done". It answers streamed (SSE, with `stream_options.include_usage`) and unstreamed requests
alike, so every client is served the same script whatever its habits. It also checks what it
is sent: every tool result must be exactly `PAYLOAD_BYTES` long (it counts `bad` requests
otherwise), and it counts requests and final answers: `GET /stats` returns them, so the
benchmark can assert each peer made exactly N + 1 calls per conversation and finished.
`POST /delay` with `{"seconds": s}` sets the latency of every later answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from pages import PAYLOAD_BYTES
from pages import page as _text


def page(n: int) -> str:
    """Page `n`: `PAYLOAD_BYTES` of word-like text (`pages.py`) that never ends in whitespace."""
    text = _text(n)[: PAYLOAD_BYTES - 1]
    return (
        text + "." if text.endswith(" ") else text + "s"
    )  # never ends in whitespace (peers strip it)


def task(rounds: int) -> str:
    return f"Read pages 1 to {rounds}."


class FakeModel:
    def __init__(self) -> None:
        self.delay = 0.0
        self.requests = 0
        self.answers = 0  # final "done" answers: conversations that reached their end
        self.bad = 0  # requests whose tool results were not PAYLOAD_BYTES long
        self.bad_sample = ""  # the first such result, shortened, for the error message

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The assistant message (and finish reason) for one request."""
        messages = body.get("messages") or []
        wanted = 0
        done = 0
        for message in messages:
            role = message.get("role")
            if role == "user" and not wanted:
                text = message.get("content")
                if isinstance(text, list):  # content parts
                    text = "".join(part.get("text", "") for part in text)
                wanted = int(str(text).rstrip(".").rsplit(" ", 1)[-1])
            elif role == "tool":
                content = message.get("content")
                if isinstance(content, list):
                    content = "".join(part.get("text", "") for part in content)
                if len(content or "") != PAYLOAD_BYTES:
                    self.bad += 1
                    if not self.bad_sample:
                        text = str(content)
                        self.bad_sample = f"{len(text)} chars: {text[:80]!r} … {text[-80:]!r}"
                done += 1
        if done >= wanted:
            self.answers += 1
            return {"content": "done", "finish": "stop"}
        call = {
            "id": f"call_{done + 1}",
            "type": "function",
            "function": {"name": "fetch_page", "arguments": json.dumps({"n": done + 1})},
        }
        return {"tool_calls": [call], "finish": "tool_calls"}

    def reply(self, body: dict[str, Any]) -> tuple[bytes, str]:
        """(response body, content type)."""
        self.requests += 1
        answer = self.answer(body)
        model = body.get("model", "fake")
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        head = {"id": f"chatcmpl-{self.requests}", "created": 0, "model": model}
        message: dict[str, Any] = {"role": "assistant", "content": answer.get("content")}
        if "tool_calls" in answer:
            message["tool_calls"] = answer["tool_calls"]
        if not body.get("stream"):
            choice = {"index": 0, "message": message, "finish_reason": answer["finish"]}
            full = {**head, "object": "chat.completion", "choices": [choice], "usage": usage}
            return json.dumps(full).encode(), "application/json"
        delta = dict(message)
        if "tool_calls" in delta:
            delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(delta["tool_calls"])]
        chunk = {**head, "object": "chat.completion.chunk"}
        events = [
            {**chunk, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
            {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": answer["finish"]}]},
        ]
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append({**chunk, "choices": [], "usage": usage})
        text = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        return text.encode(), "text/event-stream"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                length = 0
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                raw = await reader.readexactly(length) if length else b""
                status = "200 OK"
                if method == "GET" and path.endswith("/stats"):
                    stats = {
                        "requests": self.requests,
                        "answers": self.answers,
                        "bad": self.bad,
                        "bad_sample": self.bad_sample,
                    }
                    data, kind = json.dumps(stats).encode(), "application/json"
                elif method == "POST" and path.endswith("/delay"):
                    self.delay = float(json.loads(raw)["seconds"])
                    data, kind = b"{}", "application/json"
                elif method == "POST" and path.endswith("/chat/completions"):
                    if self.delay:
                        await asyncio.sleep(self.delay)
                    data, kind = self.reply(json.loads(raw))
                else:
                    status, data, kind = (
                        "404 Not Found",
                        b'{"error": {"message": "not found"}}',
                        "application/json",
                    )
                writer.write(
                    f"HTTP/1.1 {status}\r\ncontent-type: {kind}\r\ncontent-length: {len(data)}\r\n"
                    f"connection: keep-alive\r\n\r\n".encode()
                    + data
                )
                await writer.drain()
        except ConnectionError:
            return
        finally:
            writer.close()


async def serve() -> None:
    fake = FakeModel()
    server = await asyncio.start_server(fake.handle, "127.0.0.1", 0, backlog=2048)
    port = server.sockets[0].getsockname()[1]
    print(f"http://127.0.0.1:{port}/v1", flush=True)
    loop = asyncio.get_running_loop()
    # runs until the parent closes our stdin (or dies): never outlives the benchmark
    await loop.run_in_executor(None, sys.stdin.read)
    os._exit(0)  # at once: open keep-alive connections need no goodbye


if __name__ == "__main__":
    asyncio.run(serve())
