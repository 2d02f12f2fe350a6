"""`mcp_servers:` in artifactflow.yaml: one entry per MCP server, stdio or HTTP.

```yaml
mcp_servers:
  files:                        # tools register as files__read_file, files__write_file, ...
    command: npx
    args: ["-y", "@modelcontextprotocol/server-filesystem", "/srv/docs"]
    env: {LOG_LEVEL: info, API_KEY: "${FILES_API_KEY}"}   # ${VAR} reads the environment
    permissions: {read_text_file: auto, "*": confirm}      # "*": this server's default
  tickets:
    url: https://tickets.example.com/mcp
    transport: streamable_http  # or sse
    headers: {Authorization: TICKETS_AUTH}   # header → environment variable holding the value
    required: false             # a start-up failure is a warning, not an error
    timeout: 30                 # seconds per call (default: tools.timeout)
```

This module has no MCP SDK import, so reading settings stays cheap.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .permissions import Permission, parse_permissions

SERVER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,31}$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_TEMPLATE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
SEPARATOR = "__"
DEFAULT_KEY = "*"


class McpServerConfig(BaseModel):
    """One MCP server: `command` (stdio) or `url` (HTTP), never both."""

    model_config = ConfigDict(extra="forbid")

    command: str | None = None
    args: list[str] = []
    env: dict[str, str] = {}
    cwd: Path | None = None
    url: str | None = None
    transport: Literal["streamable_http", "sse"] = "streamable_http"
    headers: dict[str, str] = {}
    required: bool = True
    timeout: float | None = Field(default=None, gt=0)
    startup_timeout: float = Field(default=30.0, gt=0)
    permissions: dict[str, Permission] = {}

    @field_validator("permissions", mode="before")
    @classmethod
    def _parse_permissions(cls, value: Any) -> Any:
        return parse_permissions(value, "the server's tool names (or '*')")

    @field_validator("headers")
    @classmethod
    def _check_headers(cls, value: dict[str, str]) -> dict[str, str]:
        for header, source in value.items():
            if not (ENV_NAME.match(source) or _TEMPLATE.search(source)):
                raise ValueError(
                    f"header {header!r}: the value must name an environment variable "
                    f"(e.g. {header}: MY_TOKEN, or 'Bearer ${{MY_TOKEN}}'); never put secrets "
                    "in the file"
                )
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if bool(self.command) == bool(self.url):
            raise ValueError("give either 'command' (a stdio server) or 'url' (an HTTP server)")
        if self.url and (self.args or self.env or self.cwd):
            raise ValueError("'args', 'env' and 'cwd' apply to stdio servers ('command') only")
        if self.command and self.headers:
            raise ValueError("'headers' apply to HTTP servers ('url') only")
        return self

    @property
    def kind(self) -> str:
        return "stdio" if self.command else self.transport

    def resolved_env(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        environ = os.environ if environ is None else environ
        return {key: expand(value, environ, what=f"env {key}") for key, value in self.env.items()}

    def resolved_headers(self, environ: Mapping[str, str] | None = None) -> dict[str, str]:
        environ = os.environ if environ is None else environ
        out = {}
        for header, source in self.headers.items():
            if ENV_NAME.match(source):
                source = "${" + source + "}"
            out[header] = expand(source, environ, what=f"header {header}")
        return out

    def permission_for(self, tool_name: str) -> Permission | None:
        """The configured level for one of this server's tools (its own name), if any."""
        return self.permissions.get(tool_name, self.permissions.get(DEFAULT_KEY))


def expand(value: str, environ: Mapping[str, str], *, what: str) -> str:
    """`${VAR}` → the variable's value; a missing variable is an error naming it."""

    def sub(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise LookupError(f"{what}: environment variable {name} is not set")
        return environ[name]

    return _TEMPLATE.sub(sub, value)


def check_server_name(name: str) -> str | None:
    """Why `name` cannot name a server (it prefixes every tool name), or None."""
    if not SERVER_NAME.match(name):
        return "server names are letters, digits, '_' or '-' (at most 32), starting with a letter"
    if SEPARATOR in name or name.endswith("_"):
        return f"server names may not contain '{SEPARATOR}' or end with '_'"
    return None
