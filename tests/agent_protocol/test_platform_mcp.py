"""artifactflow as an MCP server (issue 35), judged by the `mcp` package's own client: the
assistants listed as tools at /mcp, a call answered by the run's final answer, a saved
assistant's model used, an approval surfaced as a tool error naming the paused message, auth as
the rest of the server, and `artifactflow mcp` over stdio."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from mcp import Client as McpClient
from mcp.client.stdio import StdioServerParameters

from artifactflow.testing import Text

from .test_platform import _platform
from .toy import ANSWER, NOTES


def _text(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def test_assistants_are_mcp_tools(llm_env: Any, tmp_path: Path) -> None:
    async with _platform("sqlite", llm_env, tmp_path, "crons:\n  enabled: false\n") as p:
        saved = await p.client.assistants.create(
            p.lead, name="Mini", config={"configurable": {"model": "model-mcp"}}
        )
        async with McpClient(p.url + "/mcp") as mcp:
            tools = {t.name: t for t in (await mcp.list_tools()).tools}
            assert {p.lead, saved["assistant_id"]} <= set(tools)
            assert "messages" in tools[p.lead].input_schema["properties"]

            result = await mcp.call_tool(p.lead, {"messages": "hello there"})
            assert not result.is_error, _text(result)
            assert _text(result) == ANSWER
            assert result.structured_content["answer"] == ANSWER
            thread_id = result.structured_content["thread_id"]
            assert (await p.client.threads.get(thread_id))["status"] == "idle"

            before = p.llm.request_count
            result = await mcp.call_tool(
                saved["assistant_id"], {"messages": [{"role": "user", "content": "hello again"}]}
            )
            assert _text(result) == ANSWER
            assert [r["model"] for r in p.llm.requests[before:]] == ["model-mcp"]

            paused = await mcp.call_tool(p.lead, {"messages": "write a note: via mcp"})
            assert paused.is_error
            text = _text(paused)
            assert "paused for approval" in text and "write_note" in text
            thread = paused_thread = text.split("(thread ")[1].split(")")[0]
            assert (await p.client.threads.get(paused_thread))["status"] == "interrupted"
            message_id = text.split("message ")[1].split(" ")[0]
            assert message_id in {m["id"] for m in await p.app_client.conversations.messages(thread)}
            assert NOTES == []  # nothing ran without approval

            unknown = await mcp.call_tool("nobody", {"messages": "hi"})
            assert unknown.is_error and "tools/list" in _text(unknown)
            bad = await mcp.call_tool(p.lead, {"messages": 5})
            assert bad.is_error and "messages" in _text(bad)


async def test_mcp_needs_a_token_when_auth_is_on(llm_env: Any, tmp_path: Path) -> None:
    async with _platform("sqlite", llm_env, tmp_path, "auth:\n  enabled: true\n") as p:
        async with httpx.AsyncClient(base_url=p.url) as http:
            response = await http.post(
                "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={"Accept": "application/json, text/event-stream"},
            )
        assert response.status_code == 401
        user_id, token = await p.app_client.admin.create_token("ann")
        http_client = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"})
        from mcp.client.streamable_http import streamable_http_client

        async with http_client, streamable_http_client(p.url + "/mcp", http_client=http_client) as streams:
            async with McpClient(_Streams(streams)) as mcp:
                result = await mcp.call_tool(p.lead, {"messages": "hello"})
        assert _text(result) == ANSWER
        thread_id = result.structured_content["thread_id"]
        conversation = await p.app_client.conversations.get(thread_id)
        assert conversation["user_id"] == user_id  # the token's user owns the run


class _Streams:
    """Already-open transport streams as the `Transport` the client enters."""

    def __init__(self, streams: Any) -> None:
        self.streams = streams

    async def __aenter__(self) -> Any:
        return self.streams

    async def __aexit__(self, *exc: object) -> None:
        return None


def test_stdio_server_answers(llm_env: Any, tmp_path: Path) -> None:
    """`artifactflow mcp` in a subprocess, driven by the SDK's stdio client over its stdin and
    stdout (forked from the tests' CLI fork server, tests/cli_fork.py `command()`: a process of
    its own on those pipes, without the console script's start-up imports)."""
    import anyio
    from cli_fork import command
    from conftest import make_config

    config = make_config(tmp_path)
    llm_env.route(lambda request: Text(ANSWER))
    forked = command()

    async def drive() -> tuple[list[str], str]:
        params = StdioServerParameters(
            command=forked[0],
            args=[*forked[1:], "--config-dir", str(config), "--data-dir", str(tmp_path / "data"), "mcp"],
            env={"OPENAI_BASE_URL": llm_env.base_url, "OPENAI_API_KEY": "test-key", "PATH": "/usr/bin:/bin"},
        )
        async with McpClient(params) as mcp:
            names = [t.name for t in (await mcp.list_tools()).tools]
            result = await mcp.call_tool("lead_agent", {"messages": "hello"})
            return names, _text(result)

    names, text = anyio.run(drive)
    assert "lead_agent" in names
    assert text == ANSWER
