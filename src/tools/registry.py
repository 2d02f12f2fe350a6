"""The tool registry and the one function that runs a tool call.

`run_tool_call` never raises for anything the model did wrong: unknown names, arguments that
are not JSON, arguments that fail validation, timeouts and exceptions inside the tool all
become a failed `ToolResult` whose text tells the model what to fix. A sync tool that cannot
be stopped in time is not "failed" but "unknown" (background.py says why and what follows).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import ConfigError
from .background import BackgroundCalls, Stray, ThreadCall, call_key
from .base import Permission, Tool, ToolResult
from .context import ToolContext
from .decorator import make_tool


def _from_langchain(obj: Any) -> Tool:
    """Wrap a LangChain `BaseTool` so it behaves like one of ours."""
    schema = obj.args_schema
    if schema is None or not (isinstance(schema, type) and issubclass(schema, BaseModel)):
        raise ConfigError(f"LangChain tool '{obj.name}' needs a pydantic args_schema")

    async def call(**kwargs: Any) -> Any:
        return await obj.ainvoke(kwargs)

    return Tool(
        name=obj.name,
        description=obj.description or obj.name,
        args_model=schema,
        func=call,
        permission=Permission.AUTO,
    )


class ToolRegistry:
    """Name → tool, plus the effective permission of each (config overrides the default)."""

    def __init__(self, tools: Iterable[Any] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._overrides: dict[str, Permission] = {}
        self.background = BackgroundCalls()  # sync calls we stopped waiting for
        for item in tools:
            self.register(item)

    def register(self, item: Any, *, replace: bool = False) -> Tool:
        if isinstance(item, Tool):
            tool = item
        elif _is_langchain_tool(item):
            tool = _from_langchain(item)
        elif callable(item):
            tool = make_tool(item)
        else:
            raise ConfigError(f"cannot register {item!r} as a tool")
        if tool.name in self._tools and not replace and self._tools[tool.name] is not tool:
            raise ConfigError(f"a tool named '{tool.name}' is already registered")
        self._tools[tool.name] = tool
        return tool

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

    def may_rerun(self, name: str) -> bool:
        """Whether a call interrupted by a crash may run again (the tool is idempotent)."""
        tool = self._tools.get(name)
        return bool(tool and tool.idempotent)

    def names(self) -> list[str]:
        return sorted(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def specs(self, names: Iterable[str]) -> list[dict[str, Any]]:
        return [self._tools[n].openai_spec() for n in names if n in self._tools]

    def load_plugins(self, modules: Iterable[str], config_dir: Path) -> list[str]:
        """Import plugin modules (the config folder is importable) and register their tools."""
        folder = str(config_dir)
        if folder not in sys.path:
            sys.path.insert(0, folder)
        loaded: list[str] = []
        for module_name in modules:
            where = f"(listed under plugins: in {config_dir / 'artifactflow.yaml'})"
            try:
                module = importlib.import_module(module_name)
            except SystemExit as exc:  # a plugin must not end the process that loads it
                raise ConfigError(
                    f"plugin '{module_name}' {where} called sys.exit({exc.code!r}) while "
                    "being imported; a plugin module should only define tools"
                ) from None
            except Exception as exc:
                raise ConfigError(f"plugin '{module_name}' {where} failed to import: {exc}") from exc
            for value in vars(module).values():
                if isinstance(value, Tool):
                    self.register(value, replace=True)
                    loaded.append(value.name)
        return loaded


def _is_langchain_tool(obj: Any) -> bool:
    try:
        from langchain_core.tools import BaseTool
    except ImportError:  # pragma: no cover
        return False
    return isinstance(obj, BaseTool)


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
    try:
        model = tool.args_model.model_validate(dict(args))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        return None, f"invalid arguments for '{tool.name}': {problems}"
    return {name: getattr(model, name) for name in type(model).model_fields}, None


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
    stray = None if tool.is_async else registry.background.find(context.message_id, call_key(name, args))
    if stray is not None and not tool.idempotent:
        return registry.background.repeat_result(stray), (time.perf_counter() - started) * 1000
    result = await invoke_tool(
        tool, args, context, default_timeout=default_timeout, background=registry.background
    )
    return result, (time.perf_counter() - started) * 1000


async def invoke_tool(
    tool: Tool,
    args: dict[str, Any],
    context: ToolContext,
    *,
    default_timeout: float,
    background: BackgroundCalls | None = None,
) -> ToolResult:
    kwargs = dict(args)
    if tool.context_param:
        kwargs[tool.context_param] = context
    timeout = tool.timeout or default_timeout
    if not tool.is_async:
        return await _invoke_sync(tool, args, kwargs, context, timeout, background)
    try:
        work = tool.func(**kwargs)
        if tool.cancellable:
            value = await asyncio.wait_for(work, timeout)  # type: ignore[arg-type]
        else:
            value = await _finish_even_if_cancelled(asyncio.wait_for(work, timeout))  # type: ignore[arg-type]
    except TimeoutError:
        return ToolResult.fail(
            f"tool '{tool.name}' timed out after {timeout:g} s and was stopped", outcome="timed_out"
        )
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return ToolResult.fail(f"{type(exc).__name__}: {exc}")
    return _to_result(value)


async def _invoke_sync(
    tool: Tool,
    args: dict[str, Any],
    kwargs: dict[str, Any],
    context: ToolContext,
    limit: float,
    background: BackgroundCalls | None,
) -> ToolResult:
    call = ThreadCall(tool.func, kwargs, tool.name)
    waiting = asyncio.wait_for(asyncio.shield(call.future), limit)
    try:
        if tool.cancellable:
            value = await waiting
        else:
            value = await _finish_even_if_cancelled(waiting)
    except TimeoutError:
        retry = (
            "It is safe to call it again."
            if tool.idempotent
            else "Do not call it again with the same arguments before checking whether it happened."
        )
        result = ToolResult.unknown(
            f"tool '{tool.name}' did not finish within {limit:g} s and is still running in the "
            f"background: its effect is unknown (it may still happen). {retry}",
            "timed_out",
        )
        _note(background, tool, args, context, call, result)
        return result
    except asyncio.CancelledError:
        if not call.done:
            result = ToolResult.unknown(
                f"the run was cancelled while tool '{tool.name}' was running; it is still running "
                "in the background, so its effect is unknown (it may still happen).",
                "abandoned",
            )
            _note(background, tool, args, context, call, result)
        raise
    except Exception as exc:
        return ToolResult.fail(f"{type(exc).__name__}: {exc}")
    return _to_result(value)


def _note(
    background: BackgroundCalls | None,
    tool: Tool,
    args: dict[str, Any],
    context: ToolContext,
    call: ThreadCall,
    result: ToolResult,
) -> None:
    if background is None:
        return
    stray = Stray(
        message_id=context.message_id,
        tool_call_id=context.tool_call_id,
        tool=tool.name,
        key=call_key(tool.name, args),
        outcome=result.outcome,
        result=result,
    )
    background.note(stray, call, _to_result)


def _to_result(value: Any) -> ToolResult:
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
