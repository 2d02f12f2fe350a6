"""`/mcp` whether or not the MCP SDK is installed: it is the `mcp` extra (`pip install
'artifactflow[mcp]'`), not part of the run-time install, since a first run does not need it and
it brings ~20 MB (cryptography, PyJWT, sse-starlette). Without it `/mcp` answers 501 naming the
extra, and the rest of the server works as before."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, Protocol

from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

MCP_EXTRA_HINT = "the MCP SDK is not installed: pip install 'artifactflow[mcp]'"


class Endpoint(Protocol):
    def running(self) -> contextlib.AbstractAsyncContextManager[None]: ...

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...


class McpMissing:
    """`/mcp` without the SDK: 501 with the install hint."""

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await JSONResponse({"detail": f"/mcp is not available: {MCP_EXTRA_HINT}"}, 501)(
            scope, receive, send
        )


def mcp_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("mcp") is not None


def mcp_endpoint(state: Any) -> Endpoint:
    """The MCP endpoint of the HTTP app, or `McpMissing` when the SDK is not installed."""
    if not mcp_installed():
        return McpMissing()
    from .mcp_server import McpEndpoint

    return McpEndpoint(state)
