"""MCP servers as tool sources: configuration, connections and registration.

`config` is imported by the settings and has no MCP SDK import; the SDK (about a second to
import) loads only when `mcp_servers:` names a server.
"""

from __future__ import annotations

from .config import McpServerConfig

__all__ = ["McpServerConfig"]
