"""MCP servers as tool sources, against a real server built with the SDK's server API.

The demo server (`mcp_demo_server.py`) runs as a stdio subprocess, or in this process over
streamable HTTP / SSE on 127.0.0.1; the lead calls its tools through the scripted model.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from conftest import make_config
from mcp_demo_server import PNG, build_server
from scripted_llm import Call, Text, ToolCalls
from test_permissions import run_resumer
from waiting import wait_until, wait_until_sync

from artifactflow import ConfigError, Permission, Resume, ResumeConflictError, Task

SERVER = Path(__file__).parent / "mcp_demo_server.py"


def stdio_server(name: str = "demo", extra: str = "", script: str | None = None) -> str:
    args = f"[{json.dumps(str(SERVER))}]" if script is None else f"[-c, {json.dumps(script)}]"
    return (
        f"  {name}:\n    command: {json.dumps(sys.executable)}\n    args: {args}\n"
        f"    env: {{AF_JOURNAL: \"${{AF_JOURNAL}}\"}}\n{extra}"
    )


def servers(*entries: str) -> str:
    return "mcp_servers:\n" + "".join(entries)


def tool_texts(request: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def test_tools_register_with_schemas_names_and_permissions(make_client, journal):
    yaml_text = servers(stdio_server(extra="    permissions: {stats: auto}\n")) + (
        "permissions: {demo__echo: confirm}\n"
    )
    client = await make_client(lead_tools=["demo__*"], yaml_text=yaml_text)
    registry = client.admin.services.tools
    names = [n for n in registry.names() if n.startswith("demo__")]
    assert names == sorted(
        f"demo__{n}" for n in
        ["echo", "pid", "append_line", "stats", "picture", "fail", "slow", "crash", "list_items"]
    )
    assert client.admin.services.lead.tools == tuple(names)  # the wildcard, expanded
    assert registry.source("demo__echo") == "mcp:demo"
    assert registry.get("demo__append_line").json_schema() == {
        "type": "object",
        "properties": {"text": {"title": "Text", "type": "string"}},
        "required": ["text"],
    }
    levels = {n: registry.permission(n) for n in names}
    assert levels["demo__pid"] is Permission.AUTO  # readOnlyHint
    assert levels["demo__append_line"] is Permission.CONFIRM  # destructiveHint
    assert levels["demo__crash"] is Permission.CONFIRM  # no annotations
    assert levels["demo__stats"] is Permission.AUTO  # the server's permissions
    assert levels["demo__echo"] is Permission.CONFIRM  # top-level permissions win


async def test_lead_calls_stdio_tools_and_results_map(make_client, llm, journal, tmp_path):
    client = await make_client(
        lead_tools=["demo__*"], yaml_text=servers(stdio_server(extra="    permissions: {stats: auto}\n"))
    )
    llm.script(
        ToolCalls([
            Call("demo__echo", {"text": "hello"}, id="c1"),
            Call("demo__stats", {"values": [1, 2, 3.5]}, id="c2"),
            Call("demo__picture", {}, id="c3"),
            Call("demo__fail", {"reason": "no paper"}, id="c4"),
            Call("demo__list_items", {}, id="c5"),
            Call("demo__echo", {"txt": "typo"}, id="c6"),
        ]),
        Text("done"),
    )
    result = await client.run("use the tools")
    assert result.status == "completed" and result.response == "done"
    texts = tool_texts(llm.requests[1])
    assert texts[0] == "hello"
    assert json.loads(texts[1]) == {"count": 3, "total": 6.5}
    media = tmp_path / "data" / "mcp_media"
    saved = list(media.iterdir())
    assert len(saved) == 1 and saved[0].suffix == ".png"
    assert texts[2] == f"[image image/png (67 bytes) saved as {saved[0]}]"
    assert texts[3] == "ERROR: Error executing tool fail: cannot comply: no paper"
    assert texts[4] == "a\n\nb"  # one text block per list item, as the server sent them
    assert texts[5].startswith("ERROR: invalid arguments for 'demo__echo'")
    completes = {e.data.tool_call_id: e.data for e in result.events if e.type == "tool_complete"}
    assert completes["c2"].result.metadata["structured_content"] == {"count": 3, "total": 6.5}
    attachment = completes["c3"].result.metadata["attachments"][0]
    assert attachment["kind"] == "image" and attachment["mime_type"] == "image/png"
    assert saved[0].read_bytes() == PNG
    assert base64.b64encode(PNG).decode()[:16] not in json.dumps(completes["c3"].to_dict())  # no base64
    assert completes["c4"].success is False


async def test_confirm_tool_pauses_and_resumes_in_new_process_once(
    make_client, llm, journal, tmp_path
):
    config = make_config(tmp_path, lead_tools=["demo__append_line"], yaml_text=servers(stdio_server()))
    client = await make_client(config_dir=config)
    llm.script(ToolCalls([Call("demo__append_line", {"text": "approved"}, id="c1")]))
    events = [e async for e in await client.runs.start("write it")]
    assert events[-1].type == "permission_request"
    assert events[-1].data.calls[0].tool == "demo__append_line"
    assert lines(journal) == []  # nothing ran before the decision
    mid = events[-1].message_id
    data = client.settings.data_dir
    await client.aclose()
    llm.script(Text("written"))
    result = await asyncio.to_thread(run_resumer, config, data, mid)
    assert result == {"status": "completed", "response": "written"}
    assert lines(journal) == ["approved"]
    again = await make_client(config_dir=config, data_dir=data)
    with pytest.raises(ResumeConflictError):
        await again.run(Resume(mid, "approve"))
    assert lines(journal) == ["approved"]
    assert tool_texts(llm.requests[-1]) == ["appended 'approved'"]


async def test_crashed_server_fails_its_call_and_restarts_on_next_use(
    make_client, llm, journal, caplog
):
    client = await make_client(
        lead_tools=["demo__*"],
        yaml_text=servers(stdio_server(extra="    permissions: {crash: auto}\n")),
    )
    llm.script(
        ToolCalls([Call("demo__pid", {}, id="c1")]),
        ToolCalls([Call("demo__crash", {}, id="c2")]),
        ToolCalls([Call("demo__pid", {}, id="c3")]),
        Text("survived"),
    )
    result = await client.run("crash it")
    assert result.status == "completed" and result.response == "survived"
    first_pid = int(tool_texts(llm.requests[1])[0])
    crashed = tool_texts(llm.requests[2])[1]
    assert crashed.startswith("ERROR: MCP server 'demo' stopped while this call was running")
    second_pid = int(tool_texts(llm.requests[3])[2])
    assert second_pid != first_pid

    # Killed while idle: noticed (logged) at once, so the next call restarts it before sending.
    caplog.clear()
    os.kill(second_pid, signal.SIGKILL)
    await wait_until(
        lambda: any("stopped; it will be restarted" in r.getMessage() for r in caplog.records),
        what="the restart notice",
    )
    llm.script(ToolCalls([Call("demo__pid", {}, id="c4")]), Text("again"))
    result = await client.run(Task("once more", result.conversation_id))
    third = tool_texts(llm.requests[-1])[-1]
    assert result.status == "completed" and int(third) not in (first_pid, second_pid)


async def wait_for_lines(path: Path, count: int) -> list[str]:
    await wait_until(lambda: len(lines(path)) >= count, what=f"{count} lines in {path.name}")
    return lines(path)


async def test_timeout_and_run_cancel_cancel_the_call_at_the_server(make_client, llm, journal):
    client = await make_client(
        lead_tools=["demo__slow", "demo__pid"],
        yaml_text=servers(stdio_server(extra="    timeout: 1\n")),
    )
    llm.script(
        ToolCalls([Call("demo__pid", {}, id="c1")]),
        ToolCalls([Call("demo__slow", {"seconds": 30}, id="c2")]),
        ToolCalls([Call("demo__pid", {}, id="c3")]),
        Text("ok"),
    )
    result = await client.run("be slow")
    assert result.status == "completed"
    assert tool_texts(llm.requests[2])[1] == "ERROR: tool 'demo__slow' timed out after 1 s"
    assert tool_texts(llm.requests[3])[2] == tool_texts(llm.requests[1])[0]  # same process
    assert await wait_for_lines(journal, 2) == ["slow started", "slow cancelled"]

    llm.script(ToolCalls([Call("demo__slow", {"seconds": 30}, id="c4")]))
    run = await client.runs.start("be slow again")
    async for event in run:
        if event.type == "tool_start":
            await wait_for_lines(journal, 3)  # the server is running the call
            await run.cancel()
        if event.type == "cancelled":
            break
    assert await wait_for_lines(journal, 4) == ["slow started", "slow cancelled"] * 2


BROKEN = "import sys; print('boot failure: no token', file=sys.stderr); sys.exit(3)"
HANGS = "import time; time.sleep(60)"


@pytest.mark.parametrize(
    ("script", "extra", "expected"),
    [(BROKEN, "", "boot failure: no token"), (HANGS, "    startup_timeout: 0.5\n", "no answer within 0.5 s")],
)
async def test_required_server_that_does_not_start_is_a_config_error(
    make_client, journal, script, extra, expected
):
    with pytest.raises(ConfigError) as caught:
        await make_client(
            lead_tools=["broken__*"], yaml_text=servers(stdio_server("broken", extra, script))
        )
    message = str(caught.value)
    assert "MCP server 'broken'" in message and "did not start" in message
    assert expected in message and "required: false" in message
    assert message.count("The server's stderr") <= 1, message  # shown once (BROKEN has one)
    assert script != BROKEN or message.count("ends with:\nboot failure: no token") == 1


async def test_optional_server_that_does_not_start_is_a_warning(
    make_client, llm, journal, caplog
):
    yaml_text = servers(
        stdio_server("broken", "    required: false\n", BROKEN), stdio_server("demo")
    )
    with caplog.at_level(logging.WARNING, logger="artifactflow.mcp"):
        client = await make_client(
            lead_tools=["demo__echo", "broken__*", "broken__anything"], yaml_text=yaml_text
        )
    warning = next(r.getMessage() for r in caplog.records if "broken" in r.getMessage())
    assert "did not start" in warning and "boot failure: no token" in warning
    assert warning.count("The server's stderr") == 1, warning  # once, not once per task group
    assert client.admin.services.lead.tools == ("demo__echo",)
    llm.script(ToolCalls([Call("demo__echo", {"text": "still here"})]), Text("fine"))
    result = await client.run("echo")
    assert result.status == "completed" and tool_texts(llm.requests[1]) == ["still here"]


async def test_config_mistakes_are_clear(make_client, journal):
    with pytest.raises(ConfigError, match="unknown tool.*nosuch__\\*"):
        await make_client(lead_tools=["nosuch__*"])
    with pytest.raises(ConfigError, match="either 'command'.*or 'url'"):
        await make_client(yaml_text="mcp_servers:\n  x: {command: a, url: http://h}\n")
    with pytest.raises(ConfigError, match="must name an environment variable"):
        await make_client(
            yaml_text="mcp_servers:\n  x: {url: 'http://h', headers: {Authorization: 'Bearer abc'}}\n"
        )
    with pytest.raises(ConfigError, match="may not contain '__'"):
        await make_client(yaml_text=servers(stdio_server("my__srv")))
    with pytest.raises(ConfigError, match="server has no tool.*nope"):
        await make_client(yaml_text=servers(stdio_server(extra="    permissions: {nope: auto}\n")))


# --- HTTP transports ---------------------------------------------------------------------------


class HeaderLog:
    """ASGI middleware remembering the headers of every request."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[dict[str, str]] = []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            self.seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
        await self.app(scope, receive, send)


class HttpDemo:
    """The demo server on 127.0.0.1 in a uvicorn thread; stop() waits for it to end."""

    def __init__(self, transport: str) -> None:
        self.transport = transport
        self.headers: HeaderLog | None = None
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/{'sse' if self.transport == 'sse' else 'mcp'}"

    def start(self) -> HttpDemo:
        demo = build_server()
        app = demo.sse_app() if self.transport == "sse" else demo.streamable_http_app()
        self.headers = HeaderLog(app)
        self._server = uvicorn.Server(uvicorn.Config(
            self.headers, host="127.0.0.1", port=self.port, log_level="error",
            timeout_graceful_shutdown=1,
        ))
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        server, thread = self._server, self._thread
        wait_until_sync(lambda: server.started or not thread.is_alive(), what="the MCP test server")
        assert self._server.started, "the MCP test server did not start"
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(10)
            assert not self._thread.is_alive()


@pytest.fixture(params=["streamable_http", "sse"])
def http_server(request: pytest.FixtureRequest) -> Iterator[HttpDemo]:
    server = HttpDemo(request.param).start()
    yield server
    server.stop()


async def test_http_server_tools_with_headers_from_environment(
    http_server, make_client, llm, journal, monkeypatch
):
    # http_server comes first so that it stops after the client (which closes its session).
    monkeypatch.setenv("DEMO_KEY", "s3cret")
    yaml_text = (
        f"mcp_servers:\n  web:\n    url: {http_server.url}\n    transport: {http_server.transport}\n"
        "    headers: {X-Api-Key: DEMO_KEY, Authorization: 'Bearer ${DEMO_KEY}'}\n"
        "    permissions: {stats: auto}\n"
    )
    client = await make_client(lead_tools=["web__echo", "web__stats"], yaml_text=yaml_text)
    assert client.admin.services.tools.source("web__echo") == "mcp:web"
    llm.script(
        ToolCalls([Call("web__echo", {"text": "over http"}), Call("web__stats", {"values": [2]})]),
        Text("ok"),
    )
    result = await client.run("call over http")
    assert result.status == "completed"
    texts = tool_texts(llm.requests[1])
    assert texts[0] == "over http" and json.loads(texts[1]) == {"count": 1, "total": 2.0}
    seen = http_server.headers.seen
    assert seen and all(h.get("x-api-key") == "s3cret" for h in seen)
    assert all(h.get("authorization") == "Bearer s3cret" for h in seen)


async def test_http_server_that_goes_away_is_reconnected_on_next_use(make_client, llm, journal):
    server = HttpDemo("streamable_http").start()
    try:
        yaml_text = f"mcp_servers:\n  web:\n    url: {server.url}\n"
        client = await make_client(lead_tools=["web__echo"], yaml_text=yaml_text)
        llm.script(ToolCalls([Call("web__echo", {"text": "one"})]), Text("1"))
        first = await client.run("echo")
        assert tool_texts(llm.requests[-1]) == ["one"]
        await asyncio.to_thread(server.stop)
        llm.script(ToolCalls([Call("web__echo", {"text": "two"})]), Text("2"))
        await client.run(Task("echo", first.conversation_id))
        assert tool_texts(llm.requests[-1])[-1].startswith("ERROR: MCP server 'web' stopped")
        await asyncio.to_thread(server.start)  # same port
        llm.script(ToolCalls([Call("web__echo", {"text": "three"})]), Text("3"))
        await client.run(Task("echo", first.conversation_id))
        assert tool_texts(llm.requests[-1])[-1] == "three"
        await client.aclose()
    finally:
        await asyncio.to_thread(server.stop)
