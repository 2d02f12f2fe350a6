"""Call a tool once, within its timeout, and turn whatever happens into a `ToolResult`.

An async tool is cancelled at its timeout (stopped, so "failed"). A sync tool runs in a
thread, which cannot be stopped: when it outlives its timeout or the run is cancelled, the
call's effect is "unknown" and the thread is handed to `BackgroundCalls` (background.py says
what follows). A tool marked not `cancellable` finishes even when the run is cancelled
around it, and the cancel is re-raised afterwards. Values a tool returns become JSON data.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from pydantic import BaseModel

from .background import BackgroundCalls, Stray, ThreadCall, call_key
from .base import Tool, ToolResult
from .context import ToolContext


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
        # An async tool is cancelled at its timeout: stopped, not running on.
        return ToolResult.fail(
            f"tool '{tool.name}' timed out after {timeout:g} s", outcome="timed_out"
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
