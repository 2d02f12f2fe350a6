"""MCP servers as tool sources: connections and registration.

The `mcp_servers:` configuration (`McpServerConfig`, re-exported here) lives in
`artifactflow.settings.mcp`, below the tools, with no MCP SDK import; the SDK (about a second
to import) loads only when `mcp_servers:` names a server.
"""

from __future__ import annotations

from ...settings.mcp import McpServerConfig

__all__ = ["McpServerConfig"]
