"""`HookRunner`: runs every registered hook at each point, in a documented order.

Order: hooks run in registration order — the config file's `hooks.load` list, then the
built-ins configured under `hooks:` (tool policy, then redaction), then hooks passed from
Python (`hooks=[...]`), then tracing (last, so it records what was finally sent). At a step
with an interceptor and an observer (`before_model_request` / `on_model_start`) every
interceptor runs first, each receiving the previous one's output; then the observers see
the final value.

Errors: a hook that raises becomes `HookError`, naming the hook and the point, which ends
the run with an `error` event; with `hooks.on_error: log` the failure is logged and the
value goes on unchanged. Failures in `on_run_end` and `on_error` are always only logged:
the run's outcome is already decided there. Cancellation and LangGraph's control-flow
signals are never wrapped.

Cost: the runner resolves, once, which hooks implement which point; a point nobody
implements returns at once, so a run without hooks pays one dict lookup per point.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import inspect
import logging
import types
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Literal, TypeVar, cast

from ..errors import ArtifactFlowError, UserError
from ..tools.base import ToolResult
from . import types as ht
from .base import HOOK_PREFIXES, POINTS, Hooks
from .dedupe import HookLedger, decode, encode, hook_key

log = logging.getLogger("artifactflow.hooks")
T = TypeVar("T")
OnError = Literal["raise", "log"]
LOG_ONLY = frozenset({"on_run_end", "on_error"})


class HookError(ArtifactFlowError):
    """A hook raised. The run ends with an `error` event (kind `hook`) carrying this text."""

    def __init__(self, hook: str, point: str, error: BaseException) -> None:
        super().__init__(
            f"hook '{hook}' failed in {point}: {type(error).__name__}: {error}. Fix the hook, "
            "remove it, or set `hooks.on_error: log` to log hook failures and go on"
        )
        self.hook = hook
        self.point = point
        self.error = error


def hook_name(hook: Any) -> str:
    if isinstance(hook, types.ModuleType):
        return hook.__name__
    name = getattr(hook, "name", None)
    if isinstance(name, str) and name:
        return name
    return type(hook).__name__


def _declared_names(hook: Any) -> Iterable[str]:
    """Attribute names the hook itself defines (not inherited from `Hooks`)."""
    if isinstance(hook, types.ModuleType):
        return [n for n, v in vars(hook).items() if inspect.isfunction(v) and v.__module__ == hook.__name__]
    names: set[str] = set(getattr(hook, "__dict__", {}))
    for klass in type(hook).__mro__:
        if klass in (Hooks, object):
            continue
        names.update(vars(klass))
    return names


def implemented_points(hook: Any, name: str | None = None) -> dict[str, Callable[..., Any]]:
    """Point name → bound callable, for the points `hook` really implements.

    Raises `UserError` for a hook-like name that is not a point (a typo would otherwise
    silently never fire) and for an object that implements no point at all.
    """
    label = name or hook_name(hook)
    found: dict[str, Callable[..., Any]] = {}
    for attr in sorted(_declared_names(hook)):
        if not attr.startswith(HOOK_PREFIXES):
            continue
        if attr not in POINTS:
            close = difflib.get_close_matches(attr, POINTS, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise UserError(
                f"hook '{label}' defines '{attr}', which is not a hook point{hint}. "
                f"Hook points: {', '.join(POINTS)}"
            )
        value = getattr(hook, attr)
        if callable(value):
            found[attr] = value
    if not found:
        raise UserError(
            f"hook '{label}' implements no hook point; define one of: {', '.join(POINTS)}"
        )
    return found


def _is_control_flow(exc: BaseException) -> bool:
    try:
        from langgraph.errors import GraphBubbleUp
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, GraphBubbleUp)


class HookRunner:
    """Runs hooks; one per process, shared by every run (hooks keep per-run state keyed by
    `run.message_id`). Pass `ledger` to key in-node points for exactly-once firing."""

    def __init__(
        self,
        hooks: Sequence[Any | tuple[str, Any]] = (),
        *,
        on_error: OnError = "raise",
        ledger: HookLedger | None = None,
    ) -> None:
        if on_error not in ("raise", "log"):
            raise UserError(f"hooks.on_error must be 'raise' or 'log', not {on_error!r}")
        self.on_error_mode: OnError = on_error
        self.ledger = ledger
        self.hooks: list[tuple[str, Any]] = []
        self._points: dict[str, list[tuple[str, Callable[..., Any]]]] = {p: [] for p in POINTS}
        for item in hooks:
            name, hook = item if isinstance(item, tuple) else (hook_name(item), item)
            self.add(hook, name=name)

    def add(self, hook: Any, *, name: str | None = None) -> None:
        """Register one more hook, after the others."""
        label = name or hook_name(hook)
        for point, fn in implemented_points(hook, label).items():
            self._points[point].append((label, fn))
        self.hooks.append((label, hook))

    def wants(self, *points: str) -> bool:
        """True when any hook implements any of `points` (callers may skip building the
        context objects otherwise)."""
        return any(self._points[p] for p in points)

    @property
    def empty(self) -> bool:
        return not self.hooks

    # --- calling -------------------------------------------------------------------------

    async def _call(self, label: str, fn: Callable[..., Any], point: str, *args: Any) -> Any:
        try:
            value = fn(*args)
            if inspect.isawaitable(value):
                value = await value
            return value
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if _is_control_flow(exc):
                raise
            if self.on_error_mode == "log" or point in LOG_ONLY:
                log.warning("hook '%s' failed in %s (ignored)", label, point, exc_info=True)
                return None
            raise HookError(label, point, exc) from exc

    async def _observe(self, point: str, *args: Any) -> None:
        for label, fn in self._points[point]:
            await self._call(label, fn, point, *args)

    async def _intercept(
        self, point: str, value: T, accepts: type | tuple[type, ...], call: Callable[[T], tuple[Any, ...]]
    ) -> tuple[T, str | None]:
        """Chain interceptors; return the final value and the last hook that changed it."""
        changed_by = None
        for label, fn in self._points[point]:
            result = await self._call(label, fn, point, *call(value))
            if result is None:
                continue
            if not isinstance(result, accepts):
                error = TypeError(f"returned {type(result).__name__}, expected {_names(accepts)} or None")
                if self.on_error_mode == "log":
                    log.warning("hook '%s' in %s: %s (ignored)", label, point, error)
                    continue
                raise HookError(label, point, error)
            value, changed_by = result, label  # type: ignore[assignment]
            if isinstance(result, ht.Refuse):
                break
        return value, changed_by

    async def once(self, run: ht.RunInfo, key: str, fire: Callable[[], Awaitable[T]]) -> T:
        """Fire at most once per key: a key that already fired returns its stored output."""
        if self.ledger is None:
            return await fire()
        if run.resumed or run.recovered:
            stored = await self.ledger.get(run.message_id, key)
            if stored is not None:
                return decode(stored)
        value = await fire()
        if not await self.ledger.put(run.message_id, key, encode(value)):
            stored = await self.ledger.get(run.message_id, key)
            if stored is not None:
                return decode(stored)
        return value

    # --- run -----------------------------------------------------------------------------

    async def before_run(self, run: ht.RunInfo, content: str) -> str:
        if not self._points["before_run"]:
            return content
        value, _ = await self._intercept("before_run", content, str, lambda c: (run, c))
        if not value.strip():
            raise UserError("a before_run hook left the message empty")
        return value

    async def on_run_start(self, run: ht.RunInfo) -> None:
        await self._observe("on_run_start", run)

    async def on_run_end(self, run: ht.RunInfo, end: ht.RunEnd) -> None:
        await self._observe("on_run_end", run, end)

    async def on_error(self, run: ht.RunInfo, failure: ht.Failure) -> None:
        await self._observe("on_error", run, failure)

    async def on_permission_request(self, run: ht.RunInfo, request: ht.PermissionRequest) -> None:
        await self._observe("on_permission_request", run, request)

    async def on_permission_result(self, run: ht.RunInfo, result: ht.PermissionResult) -> None:
        await self._observe("on_permission_result", run, result)

    # --- agent steps ---------------------------------------------------------------------

    async def on_agent_start(self, run: ht.RunInfo, agent: ht.AgentStep) -> None:
        await self._observe("on_agent_start", run, agent)

    async def on_agent_end(self, run: ht.RunInfo, agent: ht.AgentStep, end: ht.AgentStepEnd) -> None:
        await self._observe("on_agent_end", run, agent, end)

    async def on_compaction(self, run: ht.RunInfo, agent: ht.AgentStep, compaction: ht.Compaction) -> None:
        await self._observe("on_compaction", run, agent, compaction)

    async def on_memory_recall(self, run: ht.RunInfo, agent: ht.AgentStep, recall: ht.MemoryRecall) -> None:
        await self._observe("on_memory_recall", run, agent, recall)

    async def before_model_request(
        self, run: ht.RunInfo, agent: ht.AgentStep, request: ht.ModelRequest
    ) -> ht.ModelRequest:
        """Interceptors, then `on_model_start` observers; returns the request to send."""
        if self._points["before_model_request"]:
            request, _ = await self._intercept(
                "before_model_request", request, ht.ModelRequest, lambda r: (run, agent, r)
            )
        await self._observe("on_model_start", run, agent, request)
        return request

    async def after_model_request(
        self, run: ht.RunInfo, agent: ht.AgentStep, request: ht.ModelRequest, response: ht.ModelResponse
    ) -> ht.ModelResponse:
        """Interceptors, then `on_model_end` observers; returns the response to record."""
        if self._points["after_model_request"]:
            response, _ = await self._intercept(
                "after_model_request", response, ht.ModelResponse, lambda r: (run, agent, request, r)
            )
        await self._observe("on_model_end", run, agent, request, response)
        return response

    async def before_tool_call(self, run: ht.RunInfo, call: ht.ToolCall) -> ht.ToolCall | ht.Refuse:
        """The call to record (maybe rewritten), or a `Refuse` naming the hook that refused."""
        if not self._points["before_tool_call"]:
            return call
        value, by = await self._intercept(
            "before_tool_call", call, (ht.ToolCall, ht.Refuse), lambda c: (run, c)
        )
        if isinstance(value, ht.Refuse):
            return dataclasses.replace(value, hook=by)
        if (value.id, value.name, value.invocation) != (call.id, call.name, call.invocation):
            raise HookError(
                by or "?", "before_tool_call",
                ValueError("may change a call's arguments only, not its id, tool or agent"),
            )
        return value

    async def before_tool_calls(self, run: ht.RunInfo, calls: Iterable[ht.ToolCall]) -> list[ht.ToolCall | ht.Refuse]:
        """`before_tool_call` for each call of a model answer, in call order."""
        return [await self.before_tool_call(run, call) for call in calls]

    # --- tool rounds ---------------------------------------------------------------------

    async def on_tool_round_start(self, run: ht.RunInfo, round: ht.ToolRound) -> None:
        if not self._points["on_tool_round_start"]:
            return
        key = hook_key("on_tool_round_start", round.invocation, round.round)

        async def fire() -> None:
            await self._observe("on_tool_round_start", run, round)

        await self.once(run, key, fire)

    async def on_tool_start(self, run: ht.RunInfo, call: ht.ToolCall) -> None:
        await self._observe("on_tool_start", run, call)

    async def after_tool_call(
        self,
        run: ht.RunInfo,
        call: ht.ToolCall,
        result: ToolResult,
        duration_ms: float = 0.0,
        *,
        denied: bool = False,
        refused: bool = False,
    ) -> ToolResult:
        """Interceptors, then `on_tool_end` observers; returns the result to record."""
        if self._points["after_tool_call"]:
            result, _ = await self._intercept(
                "after_tool_call", result, ToolResult, lambda r: (run, call, r)
            )
        if self._points["on_tool_end"]:
            outcome = ht.ToolOutcome(call, result, duration_ms, denied=denied, refused=refused)
            await self._observe("on_tool_end", run, outcome)
        return result

    async def after_tool_round(self, run: ht.RunInfo, round: ht.ToolRound) -> list[ht.ChatMessage]:
        """Messages to append after the round's tool results (fired once per round key)."""
        if not self._points["after_tool_round"]:
            return []
        key = hook_key("after_tool_round", round.invocation, round.round)

        async def fire() -> list[ht.ChatMessage]:
            added: list[ht.ChatMessage] = []
            for label, fn in self._points["after_tool_round"]:
                value = await self._call(label, fn, "after_tool_round", run, round)
                added += _as_messages(label, value, self.on_error_mode)
            return added

        return await self.once(run, key, fire)

    # --- trace context and shutdown ------------------------------------------------------

    def trace_context(self, run: ht.RunInfo) -> dict[str, Any] | None:
        """What to store with a paused message so another process continues the trace:
        the first non-empty answer of a hook that has a `trace_context(run)` method."""
        for label, hook in self.hooks:
            method = getattr(hook, "trace_context", None)
            if not callable(method):
                continue
            try:
                value = method(run)
            except Exception:
                log.warning("hook '%s' failed in trace_context (ignored)", label, exc_info=True)
                continue
            if value:
                return cast("dict[str, Any]", value)  # a hook's answer, stored as given
        return None

    async def aclose(self) -> None:
        """Let hooks flush and release what they hold (`aclose()` or `close()`)."""
        for label, hook in self.hooks:
            method = getattr(hook, "aclose", None) or getattr(hook, "close", None)
            if not callable(method):
                continue
            try:
                value = method()
                if inspect.isawaitable(value):
                    await value
            except Exception:
                log.warning("hook '%s' failed to close", label, exc_info=True)


def _names(accepts: type | tuple[type, ...]) -> str:
    kinds = accepts if isinstance(accepts, tuple) else (accepts,)
    return " or ".join(k.__name__ for k in kinds)


def _as_messages(label: str, value: Any, mode: OnError) -> list[ht.ChatMessage]:
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out: list[ht.ChatMessage] = []
    for item in items:
        if isinstance(item, str):
            out.append({"role": "user", "content": item})
        elif isinstance(item, dict) and item.get("role") in ("user", "system", "assistant") and not item.get("tool_calls"):
            out.append(item)  # type: ignore[arg-type]
        else:
            error = TypeError(
                f"returned {item!r}; return a string, a chat message without tool calls, or a list"
            )
            if mode == "log":
                log.warning("hook '%s' in after_tool_round: %s (ignored)", label, error)
                continue
            raise HookError(label, "after_tool_round", error)
    return out
