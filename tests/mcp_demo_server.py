"""A small MCP server built with the SDK's server API, for the MCP tests.

`python mcp_demo_server.py` serves it over stdio; tests import `build_server()` to serve it
over streamable HTTP or SSE on 127.0.0.1. `append_line` writes to the file named by
`AF_JOURNAL` (the side effect the permission tests count); `crash` kills the process in the
middle of a call.
"""

from __future__ import annotations

import os
from pathlib import Path

import anyio
from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel

READ_ONLY = ToolAnnotations(read_only_hint=True)
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082"
)


class Stats(BaseModel):
    count: int
    total: float


def note(line: str) -> None:
    with Path(os.environ["AF_JOURNAL"]).open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")


def build_server() -> MCPServer:
    server = MCPServer("demo", log_level="WARNING")

    @server.tool(annotations=READ_ONLY)
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool(annotations=READ_ONLY)
    def pid() -> int:
        """The server's process id."""
        return os.getpid()

    @server.tool(annotations=ToolAnnotations(destructive_hint=True))
    def append_line(text: str) -> str:
        """Append one line to the journal file."""
        note(text)
        return f"appended {text!r}"

    @server.tool()
    def stats(values: list[float]) -> Stats:
        """Count and sum numbers (structured output)."""
        return Stats(count=len(values), total=sum(values))

    @server.tool(annotations=READ_ONLY)
    def picture() -> Image:
        """A 1x1 PNG."""
        return Image(data=PNG, format="png")

    @server.tool(annotations=READ_ONLY)
    def fail(reason: str) -> str:
        """Always fails with the given reason."""
        raise ToolError(f"cannot comply: {reason}")

    @server.tool(annotations=READ_ONLY)
    async def slow(seconds: float) -> str:
        """Sleep, then answer; notes its start and a cancellation in the journal."""
        note("slow started")
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            note("slow cancelled")
            raise
        return "woke up"

    @server.tool()
    def crash() -> str:
        """Kill the server process mid-call."""
        os._exit(3)

    @server.tool(name="list.items", annotations=READ_ONLY)
    def list_items() -> list[str]:
        """A tool whose name needs sanitizing."""
        return ["a", "b"]

    return server


if __name__ == "__main__":
    build_server().run("stdio")
