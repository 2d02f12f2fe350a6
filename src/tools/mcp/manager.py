"""Start the configured MCP servers, register their tools, stop them on close.

Tools register as `SERVER__TOOL` (characters outside `[A-Za-z0-9_-]` become `_`; names past
the 64-character limit of model APIs are shortened with a hash) with the server's own JSON
schema, and run through the normal tool node, so permissions, timeouts and the exactly-once
ledger apply as to any tool.

Permission of an MCP tool, first match wins:
1. `permissions:` at the top level, naming `SERVER__TOOL` (as for any tool);
2. `mcp_servers.SERVER.permissions`, naming the tool as the server does, then its `"*"`;
3. the server's annotations: `readOnlyHint: true` → auto;
4. otherwise (destructiveHint, no annotations) → confirm.
Annotations are hints from the server: trust them only as far as you trust the server.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ...errors import ConfigError
from ...settings.mcp import SEPARATOR, McpServerConfig, check_server_name
from ..base import Permission, Tool, ToolResult
from .connection import McpConnection, McpUnavailable
from .results import MEDIA_FOLDER, to_tool_result

if TYPE_CHECKING:
    from ...settings import Settings
    from ..registry import ToolRegistry

log = logging.getLogger("artifactflow.mcp")
MAX_NAME = 64
_CONTEXT = "__artifactflow_context__"
_INVALID = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, name: str) -> str:
    full = f"{server}{SEPARATOR}{_INVALID.sub('_', name)}"
    if len(full) > MAX_NAME:
        digest = hashlib.sha1(name.encode()).hexdigest()[:8]
        full = f"{full[: MAX_NAME - 9]}_{digest}"
    return full


def default_permission(config: McpServerConfig, tool: Any) -> Permission:
    configured = config.permission_for(tool.name)
    if configured is not None:
        return configured
    annotations = getattr(tool, "annotations", None)
    if annotations is not None and annotations.read_only_hint is True:
        return Permission.AUTO
    return Permission.CONFIRM


def is_mcp_name(name: str, settings: Settings) -> bool:
    """Whether `name` belongs to a configured MCP server (checked once the servers start)."""
    return any(name.startswith(server + SEPARATOR) for server in settings.mcp_servers)


class McpManager:
    """The running MCP servers of one engine."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.connections: dict[str, McpConnection] = {}
        self.failed: dict[str, str] = {}

    async def start(self, registry: ToolRegistry) -> None:
        settings = self.settings
        where = settings.config_dir / "artifactflow.yaml"
        configs: dict[str, McpServerConfig] = {}
        for name, raw in settings.mcp_servers.items():
            problem = check_server_name(name)
            try:  # keyword overrides from Python arrive unvalidated
                configs[name] = McpServerConfig.model_validate(raw)
            except ValidationError as exc:
                err = exc.errors()[0]
                problem = f"{'.'.join(str(p) for p in err['loc']) or 'entry'}: {err['msg']}"
            if problem:
                raise ConfigError(f"{where}: field 'mcp_servers.{name}': {problem}")
        self.connections = {
            name: McpConnection(name, config, config_dir=settings.config_dir,
                                log_dir=settings.data_dir / "logs")
            for name, config in configs.items()
        }
        outcomes = await asyncio.gather(
            *(c.start() for c in self.connections.values()), return_exceptions=True
        )
        for connection, outcome in zip(list(self.connections.values()), outcomes, strict=True):
            if isinstance(outcome, BaseException):
                if not isinstance(outcome, Exception):
                    await self.aclose()
                    raise outcome
                await self._failed(connection, outcome, registry)
        try:
            for connection in self.connections.values():
                self._register(connection, registry)
            self._check_permissions(registry)
        except BaseException:
            await self.aclose()
            raise

    async def _failed(self, connection: McpConnection, exc: Exception, registry: ToolRegistry) -> None:
        reason = connection.explain(exc)
        text = (
            f"MCP server '{connection.name}' ({connection.describe()}) did not start: {reason}"
        )
        if connection.config.required:
            await self.aclose()
            raise ConfigError(
                f"{self.settings.config_dir / 'artifactflow.yaml'}: mcp_servers.{connection.name}: "
                f"{text}. Fix the server or its settings, or set 'required: false' to start "
                "without it."
            ) from None
        log.warning("%s; continuing without its tools (required: false)", text)
        self.failed[connection.name] = reason
        del self.connections[connection.name]
        registry.mark_absent(connection.name + SEPARATOR)

    def _register(self, connection: McpConnection, registry: ToolRegistry) -> None:
        config = connection.config
        known = {t.name for t in connection.tools}
        unknown = [k for k in config.permissions if k != "*" and k not in known]
        if unknown:
            raise ConfigError(
                f"{self.settings.config_dir / 'artifactflow.yaml'}: field "
                f"'mcp_servers.{connection.name}.permissions': server has no tool(s) "
                f"{', '.join(unknown)}; its tools: {', '.join(sorted(known)) or 'none'}"
            )
        taken: dict[str, str] = {}
        for spec in connection.tools:
            name = tool_name(connection.name, spec.name)
            if name in taken:  # two of the server's names that sanitize alike
                digest = hashlib.sha1(spec.name.encode()).hexdigest()[:6]
                name = tool_name(connection.name, f"{spec.name}_{digest}")
            taken[name] = spec.name
            schema = dict(spec.input_schema or {})
            schema.pop("title", None)
            schema.setdefault("type", "object")
            schema.setdefault("properties", {})
            registry.register(
                Tool(
                    name=name,
                    description=spec.description or getattr(spec, "title", None) or spec.name,
                    args_model=None,
                    func=_caller(connection, spec.name),
                    permission=default_permission(config, spec),
                    timeout=config.timeout,
                    context_param=_CONTEXT,
                    input_schema=schema,
                    source=f"mcp:{connection.name}",
                ),
                replace=True,
            )

    def _check_permissions(self, registry: ToolRegistry) -> None:
        absent = tuple(f"{name}{SEPARATOR}" for name in self.failed)
        missing = [
            n for n in self.settings.permissions
            if is_mcp_name(n, self.settings) and n not in registry and not n.startswith(absent)
        ]
        if missing:
            raise ConfigError(
                f"{self.settings.config_dir / 'artifactflow.yaml'}: field 'permissions': unknown "
                f"MCP tool(s) {', '.join(missing)}; known tools: {', '.join(registry.names())}"
            )

    async def aclose(self) -> None:
        connections = list(self.connections.values())
        await asyncio.gather(*(c.aclose() for c in connections), return_exceptions=True)


def _caller(connection: McpConnection, name: str) -> Any:
    async def call(**kwargs: Any) -> ToolResult:
        context = kwargs.pop(_CONTEXT, None)
        try:
            result = await connection.call(name, kwargs)
        except McpUnavailable as exc:
            return ToolResult.fail(str(exc), mcp_server=connection.name, mcp_tool=name)
        settings = context.services.get("settings") if context is not None else None
        media = settings.data_dir / MEDIA_FOLDER if settings is not None else None
        return await asyncio.to_thread(
            to_tool_result, result, server=connection.name, tool=name, media_dir=media
        )

    return call


async def start_mcp_servers(settings: Settings, registry: ToolRegistry) -> McpManager | None:
    """Start every configured server and register its tools; `registry.aclose()` stops them.

    Raises `ConfigError` naming a required server that does not start.
    """
    if not settings.mcp_servers:
        return None
    manager = McpManager(settings)
    await manager.start(registry)
    registry.add_closer(manager.aclose)
    return manager
