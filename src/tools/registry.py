"""The tool registry and the one function that runs a tool call.

`run_tool_call` never raises for anything the model did wrong: unknown names, arguments that
are not JSON, arguments that fail validation, timeouts and exceptions inside the tool all
become a failed `ToolResult` whose text tells the model what to fix.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import ConfigError
from .base import Permission, Tool, ToolResult
from .context import ToolContext
from .decorator import make_tool
from .langchain import is_langchain_tool, wrap_tool

BUILTIN, PLUGIN = "builtin", "plugin"
WILDCARD = "__*"  # `SERVER__*` in an agent's tools: every tool of that MCP server


class ToolRegistry:
    """Name → tool, plus the effective permission of each (config overrides the default).

    It also owns what keeps some tools alive (MCP server connections): `aclose()` stops them.
    """

    def __init__(self, tools: Iterable[Any] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._overrides: dict[str, Permission] = {}
        self._sources: dict[str, str] = {}
        self._absent_prefixes: set[str] = set()
        self._closers: list[Callable[[], Awaitable[None]]] = []
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
        self._sources[tool.name] = source or tool.source or _infer_source(tool)
        return tool

    def register_langchain_tools(self, modules: Iterable[str]) -> list[str]:
        """Register bare LangChain tools found in already-imported plugin modules (AUTO unless
        `permissions:` says otherwise); names already registered (e.g. a `wrap_tool` of the
        same tool) are left alone."""
        added: list[str] = []
        for module_name in modules:
            module = sys.modules.get(module_name)
            for value in vars(module).values() if module else ():
                if is_langchain_tool(value) and value.name not in self._tools:
                    added.append(self.register(value).name)
        return added

    def set_permissions(self, overrides: Mapping[str, Permission | str]) -> None:
        for name, level in overrides.items():
            self._overrides[name] = Permission.parse(level)

    def permission(self, name: str) -> Permission:
        if name in self._overrides:
            return self._overrides[name]
        tool = self._tools.get(name)
        return tool.permission if tool else Permission.AUTO

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def source(self, name: str) -> str:
        return self._sources.get(name, "")

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def specs(self, names: Iterable[str]) -> list[dict[str, Any]]:
        return [self._tools[n].openai_spec() for n in names if n in self._tools]

    def describe(self) -> list[dict[str, Any]]:
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
        """Import plugin modules (the config folder is importable) and register their tools."""
        folder = str(config_dir)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        loaded: list[str] = []
        for module_name in modules:
            try:
                module = importlib.import_module(module_name)
            except Exception as exc:
                raise ConfigError(
                    f"plugin '{module_name}' (listed under plugins: in "
                    f"{config_dir / 'artifactflow.yaml'}) failed to import: {exc}"
                ) from exc
            for value in vars(module).values():
                if isinstance(value, Tool):
                    self.register(value, replace=True)
                    loaded.append(value.name)
        return loaded


def _infer_source(tool: Tool) -> str:
    module = getattr(tool.func, "__module__", "") or ""
    return BUILTIN if module.startswith("artifactflow.") else PLUGIN


def parse_arguments(raw: str | Mapping[str, Any] | None) -> tuple[dict[str, Any] | None, str | None]:
    """Raw model arguments → dict, or an error text the model can act on."""
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, Mapping):
        return dict(raw), None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        snippet = raw if len(raw) <= 200 else raw[:200] + "…"
        return None, (
            f"arguments are not valid JSON ({exc.msg} at position {exc.pos}): {snippet!r}. "
            "Send the arguments as one JSON object."
        )
    if not isinstance(value, dict):
        return None, "arguments must be a JSON object"
    return value, None


def validate_arguments(tool: Tool, args: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    if tool.args_model is None:
        return _validate_json_schema(tool, args)
    try:
        model = tool.args_model.model_validate(dict(args))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        return None, f"invalid arguments for '{tool.name}': {problems}"
    return {name: getattr(model, name) for name in type(model).model_fields}, None


def _validate_json_schema(
    tool: Tool, args: Mapping[str, Any]
) -> tuple[dict[str, Any] | None, str | None]:
    """Check arguments against a ready JSON schema; the arguments pass through unchanged."""
    import jsonschema

    schema = tool.json_schema()
    try:
        validator = jsonschema.validators.validator_for(schema)(schema)
        errors = sorted(validator.iter_errors(dict(args)), key=lambda e: list(e.path))
    except jsonschema.exceptions.SchemaError:  # the server's schema is broken: let it judge
        return dict(args), None
    if not errors:
        return dict(args), None
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e.path) or 'arguments'}: {e.message}" for e in errors[:5]
    )
    return None, f"invalid arguments for '{tool.name}': {problems}"


async def run_tool_call(
    registry: ToolRegistry,
    name: str,
    arguments: str | Mapping[str, Any] | None,
    context: ToolContext,
    *,
    default_timeout: float,
    allowed: Iterable[str] | None = None,
) -> tuple[ToolResult, float]:
    """Run one call; return its result and duration in ms. Never raises on tool errors."""
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
    result = await invoke_tool(tool, args, context, default_timeout=default_timeout)
    return result, (time.perf_counter() - started) * 1000


async def invoke_tool(
    tool: Tool, args: dict[str, Any], context: ToolContext, *, default_timeout: float
) -> ToolResult:
    kwargs = dict(args)
    if tool.context_param:
        kwargs[tool.context_param] = context
    timeout = tool.timeout or default_timeout
    try:
        if tool.is_async:
            work = tool.func(**kwargs)
        else:
            work = asyncio.to_thread(tool.func, **kwargs)
        if tool.cancellable:
            value = await asyncio.wait_for(work, timeout)  # type: ignore[arg-type]
        else:
            value = await _finish_even_if_cancelled(asyncio.wait_for(work, timeout))  # type: ignore[arg-type]
    except TimeoutError:
        return ToolResult.fail(f"tool '{tool.name}' timed out after {timeout:g} s")
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return ToolResult.fail(f"{type(exc).__name__}: {exc}")
    if isinstance(value, ToolResult):
        return value
    return ToolResult(success=True, data=_jsonable(value))


async def _finish_even_if_cancelled(work: Any) -> Any:
    """Run `work` to completion even if the caller is cancelled, then re-raise the cancel."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await task
        raise


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return str(value)
