"""The tool registry and the one function that runs a tool call.

`run_tool_call` never raises for anything the model did wrong: unknown names, arguments that
are not JSON, arguments that fail validation, timeouts and exceptions inside the tool all
become a failed `ToolResult` whose text tells the model what to fix. A sync tool that cannot
be stopped in time is not "failed" but "unknown" (background.py says why and what follows).

The steps of a call live beside it: ``arguments.py`` (parse and validate what the model
sent), ``invoke.py`` (run the tool within its timeout); ``plugins.py`` finds the modules the
registry loads tools from. Their public names are re-exported here.
"""

from __future__ import annotations

import copy
import importlib.metadata
import os
import sys
import time
import types
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from ..errors import ConfigError
from ..shapes import JsonObject
from .arguments import argument_error, parse_arguments, validate_arguments
from .background import BackgroundCalls, call_key
from .base import Permission, Tool, ToolResult
from .context import ToolContext
from .decorator import make_tool
from .invoke import invoke_tool
from .langchain import is_langchain_tool, wrap_tool
from .plugins import ENTRY_POINT_GROUP, load_plugin_module

__all__ = [
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "PLUGIN",
    "WILDCARD",
    "ToolRegistry",
    "argument_error",
    "invoke_tool",
    "parse_arguments",
    "run_tool_call",
    "validate_arguments",
]

BUILTIN, PLUGIN = "builtin", "plugin"
WILDCARD = "__*"  # `SERVER__*` in an agent's tools: every tool of that MCP server


class ToolDescription(TypedDict):
    """A registered tool as `describe` lists it (`artifactflow tools`, `GET /tools`)."""

    name: str
    source: str  # builtin, plugin, langchain, mcp:SERVER
    permission: str  # the effective level
    timeout: float | None
    description: str
    schema: JsonObject  # JSON Schema of the arguments
    agents: NotRequired[list[str]]  # the agents whose files name it (`client.admin.tools`)


class ToolRegistry:
    """Name → tool, plus the effective permission of each (config overrides the default).

    It also owns what keeps some tools alive (MCP server connections): `aclose()` stops them.

    `specs(names)` is asked for on every agent step; the OpenAI tool specs of each list of
    names are built once and kept until the next `register` (building a pydantic JSON schema
    per tool per step was a measurable share of a round).
    """

    def __init__(self, tools: Iterable[Any] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._overrides: dict[str, Permission] = {}
        self._sources: dict[str, str] = {}
        self._absent_prefixes: set[str] = set()
        self._closers: list[Callable[[], Awaitable[None]]] = []
        self._specs: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        self.background = BackgroundCalls()  # sync calls we stopped waiting for
        for item in tools:
            self.register(item)

    def register(self, item: Any, *, replace: bool = False, source: str | None = None) -> Tool:
        if isinstance(item, Tool):
            tool = item
        elif is_langchain_tool(item):
            tool = wrap_tool(item)
        elif callable(item):
            tool = make_tool(item)
        else:
            raise ConfigError(f"cannot register {item!r} as a tool")
        if tool.name in self._tools and not replace and self._tools[tool.name] is not tool:
            raise ConfigError(f"a tool named '{tool.name}' is already registered")
        self._tools[tool.name] = tool
        self._specs.clear()
        self._sources[tool.name] = source or tool.source or _infer_source(tool)
        return tool

    def set_permissions(self, overrides: Mapping[str, Permission | str]) -> None:
        for name, level in overrides.items():
            self._overrides[name] = Permission.parse(level)

    def with_permissions(self, overrides: Mapping[str, Permission | str]) -> ToolRegistry:
        """A view of this registry (same tools, specs and background calls) whose permissions
        are these `overrides` over this one's: one run's permission overrides (an assistant's),
        without changing the process's registry."""
        view = copy.copy(self)
        view._overrides = dict(self._overrides)
        view.set_permissions(overrides)
        return view

    def permission(self, name: str) -> Permission:
        if name in self._overrides:
            return self._overrides[name]
        tool = self._tools.get(name)
        return tool.permission if tool else Permission.AUTO

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def may_rerun(self, name: str) -> bool:
        """Whether a call interrupted by a crash may run again (the tool is idempotent)."""
        tool = self._tools.get(name)
        return bool(tool and tool.idempotent)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def source(self, name: str) -> str:
        return self._sources.get(name, "")

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def specs(self, names: Iterable[str]) -> list[dict[str, Any]]:
        """OpenAI tool specs of the registered tools among `names`, in that order. The list is
        cached and shared: do not change it (re-register a tool to change its spec)."""
        key = tuple(names)
        specs = self._specs.get(key)
        if specs is None:
            specs = self._specs[key] = [
                self._tools[n].openai_spec() for n in key if n in self._tools
            ]
        return specs

    def describe(self) -> list[ToolDescription]:
        """Every tool with its source, effective permission, timeout and JSON schema."""
        return [
            {
                "name": name,
                "source": self.source(name),
                "permission": self.permission(name).value,
                "timeout": tool.timeout,
                "description": tool.description,
                "schema": tool.json_schema(),
            }
            for name, tool in sorted(self._tools.items())
        ]

    # --- names in agent files ----------------------------------------------------------------

    def mark_absent(self, prefix: str) -> None:
        """Tools under `prefix` (`SERVER__`) are knowingly missing: an optional MCP server did
        not start. Agents naming them get nothing instead of a config error."""
        self._absent_prefixes.add(prefix)

    def expand(self, names: Iterable[str]) -> tuple[list[str], list[str]]:
        """Resolve an agent's `tools:` (with `SERVER__*` wildcards) → (tool names, unknown)."""
        resolved: list[str] = []
        unknown: list[str] = []
        for name in names:
            if name.endswith(WILDCARD):
                prefix = name[: -len("*")]
                matches = [n for n in sorted(self._tools) if n.startswith(prefix)]
                if not matches and prefix not in self._absent_prefixes:
                    unknown.append(name)
                found = matches
            elif name in self._tools:
                found = [name]
            else:
                if not any(name.startswith(p) for p in self._absent_prefixes):
                    unknown.append(name)
                found = []
            resolved.extend(n for n in found if n not in resolved)
        return resolved, unknown

    # --- lifetime ------------------------------------------------------------------------------

    def add_closer(self, closer: Callable[[], Awaitable[None]]) -> None:
        self._closers.append(closer)

    async def aclose(self) -> None:
        """Stop what the tools hold (MCP servers); the registry can be closed more than once."""
        closers, self._closers = self._closers, []
        for closer in reversed(closers):
            await closer()

    def load_plugins(self, modules: Iterable[str], config_dir: Path) -> list[str]:
        """Register the tools of each plugin listed under `plugins:`: a file in the config
        folder (`name.py` or `name/__init__.py`, loaded by path), else an installed module."""
        loaded: list[str] = []
        where = f"(listed under plugins: in {Path(config_dir) / 'artifactflow.yaml'})"
        for name in modules:
            try:
                module = load_plugin_module(name, Path(config_dir))
            except ConfigError:
                raise
            except SystemExit as exc:  # a plugin must not end the process that loads it
                raise ConfigError(
                    f"plugin '{name}' {where} called sys.exit({exc.code!r}) while being "
                    "imported; a plugin module should only define tools"
                ) from None
            except Exception as exc:
                raise ConfigError(f"plugin '{name}' {where} failed to import: {exc}") from exc
            loaded += self._register_all(vars(module).values())
        return loaded

    def load_entry_points(self, group: str = ENTRY_POINT_GROUP) -> list[str]:
        """Register the tools that installed packages publish under the entry-point `group`.

        An entry point may name a module (its tools are registered), a tool, or a list of
        tools: `[project.entry-points."artifactflow.tools"] mine = "my_pkg.tools"`."""
        loaded: list[str] = []
        for point in _entry_points(group):
            source = point.dist.name if point.dist is not None else "an unknown package"
            try:
                target = point.load()
            except Exception as exc:
                raise ConfigError(
                    f"plugin entry point '{point.name} = {point.value}' (group {group}, from "
                    f"{source}) failed to load: {exc}; fix or uninstall that package"
                ) from exc
            if isinstance(target, types.ModuleType):
                items: Iterable[Any] = vars(target).values()
            elif isinstance(target, list | tuple):
                items = target
            else:
                items = [target]
            found = self._register_all(items, strict=not isinstance(target, types.ModuleType))
            if not found:
                raise ConfigError(
                    f"plugin entry point '{point.name} = {point.value}' (group {group}, from "
                    f"{source}) has no tools: point it at a module, a @tool or a list of tools"
                )
            loaded += found
        return loaded

    def _register_all(self, items: Iterable[Any], *, strict: bool = False) -> list[str]:
        """Register the `Tool`s among `items` (with `strict`, every item must be a tool).

        Bare LangChain tools in a module come after its `Tool`s and do not replace them, so a
        `wrap_tool` of the same tool (with its permission and timeout) wins; they are AUTO
        unless `permissions:` says otherwise."""
        values = list(items)
        names = []
        for value in values:
            if isinstance(value, Tool) or (
                strict and (is_langchain_tool(value) or callable(value))
            ):
                names.append(self.register(value, replace=True).name)
        if not strict:
            for value in values:
                if is_langchain_tool(value) and value.name not in names:
                    names.append(self.register(value, replace=True).name)
        return names


def _infer_source(tool: Tool) -> str:
    module = getattr(tool.func, "__module__", "") or ""
    return BUILTIN if module.startswith("artifactflow.") else PLUGIN


async def run_tool_call(
    registry: ToolRegistry,
    name: str,
    arguments: str | Mapping[str, Any] | None,
    context: ToolContext,
    *,
    default_timeout: float,
    allowed: Iterable[str] | None = None,
) -> tuple[ToolResult, float]:
    """Run one call; return its result and duration in ms. Never raises on tool errors.

    A sync tool that outlives its timeout keeps running (threads cannot be stopped): its
    result says so (`outcome` `timed_out`, `may_still_take_effect`), and an identical call of
    a tool that is not `idempotent` is not run again in the same message (see background.py).
    """
    started = time.perf_counter()
    allowed_names = set(allowed) if allowed is not None else None
    tool = registry.get(name)
    if tool is None or (allowed_names is not None and name not in allowed_names):
        choices = sorted(allowed_names if allowed_names is not None else registry.names())
        result = ToolResult.fail(
            f"unknown tool '{name}'. Available tools: {', '.join(choices) or 'none'}"
        )
        return result, (time.perf_counter() - started) * 1000
    args, error = parse_arguments(arguments)
    if error is None and args is not None:
        args, error = validate_arguments(tool, args)
    if error is not None or args is None:
        return ToolResult.fail(error or "invalid arguments"), (time.perf_counter() - started) * 1000
    stray = (
        None
        if tool.is_async
        else registry.background.find(context.message_id, call_key(name, args))
    )
    if stray is not None and not tool.idempotent:
        return registry.background.repeat_result(stray), (time.perf_counter() - started) * 1000
    result = await invoke_tool(
        tool, args, context, default_timeout=default_timeout, background=registry.background
    )
    return result, (time.perf_counter() - started) * 1000


_ENTRY_POINTS: dict[tuple[object, ...], Any] = {}


def _entry_points(group: str) -> Any:
    """`importlib.metadata.entry_points(group=group)`, scanned once per state of `sys.path`:
    the scan reads every installed distribution (~5-10 ms), and an engine opens with it. The
    key holds each path entry's modification time, so a package installed into a folder on
    the path (a new dist-info directory) is seen by the next open."""
    key: list[object] = [group]
    for entry in sys.path:
        try:
            key.append((entry, os.stat(entry or ".").st_mtime_ns))
        except OSError:
            key.append((entry, None))
    frozen = tuple(key)
    found = _ENTRY_POINTS.get(frozen)
    if found is None:
        if len(_ENTRY_POINTS) > 32:
            _ENTRY_POINTS.clear()
        found = _ENTRY_POINTS[frozen] = importlib.metadata.entry_points(group=group)
    return found
