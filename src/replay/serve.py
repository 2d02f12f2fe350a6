"""Serving a recording back: the replay `Model` and the tool interception.

`ReplayModel` answers a request with the recorded response of the same request: same agent,
same messages, same tool specs (matched by value, not by order, so parallel subagents may ask
in any order). `ToolServer` replaces every tool's function in the replay's registry with one
that returns the recorded result of the same call (same agent, call id, tool and validated
arguments), so no tool runs: no network, no side effect. The exception are the built-in
artifact tools, whose only effect is on the app store: they run against the replay's own
temporary store (seeded with the conversation's artifacts as they were), which keeps the
artifact inventory the lead sees faithful, and their result must equal the recorded one.

The first request or call that has no recorded twin is a divergence: it is reported to the
`Tracker` with a diff, and the caller is parked until the driver cancels the run.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..agents.model.base import DeltaCallback, ModelRequest, ModelResponse, Usage, send_delta
from ..errors import ContextOverflowError, FatalLLMError, RetryableLLMError
from ..shapes import ChatMessage, JsonObject
from ..tools.base import Tool, ToolResult
from ..tools.builtin.artifacts import ARTIFACT_TOOLS
from ..tools.registry import BUILTIN, invoke_tool, validate_arguments
from . import delta
from .diff import json_diff, messages_diff, render_json, render_messages, text_diff, unified
from .report import Divergence, DivergenceKind

if TYPE_CHECKING:
    from ..tools.context import ToolContext
    from ..tools.registry import ToolRegistry
    from .session import ModelCall, Session, ToolCallRecord

SANDBOXED = frozenset(t.name for t in ARTIFACT_TOOLS)  # run for real, on the replay's store
_CONTEXT = "__replay_context__"
TIMEOUT = 60.0  # seconds for a sandboxed artifact tool
_ERRORS = {
    "RetryableLLMError": RetryableLLMError,
    "ContextOverflowError": ContextOverflowError,
    "FatalLLMError": FatalLLMError,
}


def plain(value: Any) -> Any:
    """`value` as JSON would give it back (tuples → lists, …), to compare with a file."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


class Tracker:
    """Collects divergences; the driver waits on `diverged` and cancels the run."""

    def __init__(self) -> None:
        self.divergences: list[Divergence] = []
        self.diverged = asyncio.Event()
        self.served = 0

    def report(self, divergence: Divergence) -> None:
        self.divergences.append(divergence)
        self.diverged.set()

    @property
    def first(self) -> Divergence | None:
        return min(self.divergences, key=lambda d: d.step, default=None)

    async def park(self) -> Any:
        """Wait to be cancelled: the run must not go on past a divergence."""
        await asyncio.Event().wait()


class ReplayModel:
    """A `Model` that serves the recorded responses of a session."""

    api = "replay"

    def __init__(self, session: Session, tracker: Tracker) -> None:
        self.pending: list[ModelCall] = list(session.calls)
        self.total = len(session.calls)
        self.tracker = tracker

    async def aclose(self) -> None:
        return None

    async def complete(
        self, request: ModelRequest, on_delta: DeltaCallback | None = None
    ) -> ModelResponse:
        messages = plain(list(request.messages))
        tools = plain(list(request.tools)) if request.tools else None
        mine = [c for c in self.pending if c.agent == request.agent]
        match = next((c for c in mine if c.messages == messages and c.tools == tools), None)
        if match is None:
            self.tracker.report(self._divergence(request.agent, messages, tools, mine))
            return await self.tracker.park()
        self.pending.remove(match)
        self.tracker.served += 1
        if match.error is not None:
            kind = _ERRORS.get(match.error.get("kind", ""), FatalLLMError)
            raise kind(match.error.get("message", ""), agent=request.agent)
        response = match.response or {}
        content = response.get("content") or ""
        if content:
            await send_delta(on_delta, content)
        usage = response.get("usage")
        return ModelResponse(
            content=content,
            tool_calls=[c.copy() for c in response.get("tool_calls") or []],
            model=response.get("model") or "replay",
            usage=Usage(usage["prompt_tokens"], usage["completion_tokens"]) if usage else None,
            finish_reason=response.get("finish_reason"),
            attempts=response.get("attempts") or 1,
        )

    def _divergence(
        self,
        agent: str | None,
        messages: list[ChatMessage],
        tools: list[JsonObject] | None,
        mine: list[ModelCall],
    ) -> Divergence:
        who = agent or "a model call"
        if not mine:
            step = self.pending[0].step if self.pending else self.total + 1
            return Divergence(
                step, DivergenceKind.EXTRA_REQUEST,
                f"{who} made a model request the recorded run did not make",
                agent, unified([], render_messages(messages)),
            )
        # The recorded request this one should have been: the longest shared prefix.
        expected = max(mine, key=lambda c: (delta.common_prefix(c.messages, messages), -c.step))
        if expected.messages != messages:
            index = delta.common_prefix(expected.messages, messages)
            return Divergence(
                expected.step, DivergenceKind.MESSAGES,
                f"{who} sent different messages to the model (first difference at message "
                f"{index})",
                agent, messages_diff(expected.messages, messages),
            )
        names = sorted(_tool_names(expected.tools) ^ _tool_names(tools))
        detail = f" ({', '.join(names)})" if names else ""
        return Divergence(
            expected.step, DivergenceKind.TOOL_SPECS,
            f"{who} was offered different tools{detail}",
            agent, json_diff(expected.tools, tools),
        )


def _tool_names(tools: list[JsonObject] | None) -> set[str]:
    return {(t.get("function") or {}).get("name", "?") for t in tools or []}


class ToolServer:
    """Answers tool calls from the recording instead of running them."""

    def __init__(self, session: Session, tracker: Tracker) -> None:
        self.pending: list[ToolCallRecord] = [t for t in session.tools if not t.denied]
        self.tracker = tracker
        self.last_step = len(session.calls)

    def install(self, registry: ToolRegistry) -> None:
        """Swap every tool's function in `registry` for the recording (artifact tools run
        for real on the replay's own store, checked against the recording)."""
        for name in registry.names():
            tool = registry.get(name)
            assert tool is not None
            sandboxed = name in SANDBOXED and registry.source(name) == BUILTIN
            served = replace(
                tool,
                func=self._runner(tool, sandboxed),
                is_async=True,
                context_param=tool.context_param or _CONTEXT,
                cancellable=True,  # a parked call must stop when the run is cancelled
            )
            registry.register(served, replace=True, source=registry.source(name))

    def _runner(self, original: Tool, sandboxed: bool) -> Any:
        async def run(**kwargs: Any) -> Any:
            context: ToolContext = kwargs.pop(original.context_param or _CONTEXT)
            record = self._match(original, kwargs, context)
            if record is None:
                return await self.tracker.park()
            if not sandboxed:
                return ToolResult.from_dict(record.result)
            result = await invoke_tool(original, kwargs, context, default_timeout=TIMEOUT)
            recorded = ToolResult.from_dict(record.result)
            if result.model_text() != recorded.model_text():
                self.tracker.report(
                    Divergence(
                        record.step or self.last_step, DivergenceKind.TOOL_RESULT,
                        f"{original.name} (call {record.tool_call_id}) returned a different "
                        "result in the replay's sandbox",
                        context.agent, text_diff(recorded.model_text(), result.model_text()),
                    )
                )
                return await self.tracker.park()
            return result

        return run

    def _match(self, tool: Tool, kwargs: JsonObject, context: ToolContext) -> ToolCallRecord | None:
        same_call = [
            r for r in self.pending
            if r.tool == tool.name and r.tool_call_id == context.tool_call_id and r.agent == context.agent
        ]
        for record in same_call:
            if _same_arguments(tool, record.arguments, kwargs):
                self.pending.remove(record)
                return record
        if same_call:
            record = same_call[0]
            self.tracker.report(
                Divergence(
                    record.step or self.last_step, DivergenceKind.TOOL_ARGUMENTS,
                    f"{tool.name} (call {record.tool_call_id}) was called with different arguments",
                    context.agent, json_diff(record.arguments, plain(kwargs)),
                )
            )
            return None
        others = [r for r in self.pending if r.agent == context.agent]
        step = min((r.step for r in others if r.step), default=self.last_step)
        self.tracker.report(
            Divergence(
                step, DivergenceKind.TOOL_CALL,
                f"{context.agent} called {tool.name} (call {context.tool_call_id}), a call the "
                "recorded run did not make",
                context.agent,
                unified([], render_json({"tool": tool.name, "arguments": plain(kwargs)})),
            )
        )
        return None


def _same_arguments(tool: Tool, recorded: Any, given: JsonObject) -> bool:
    """Compare as the tool sees them: the recorded arguments validated like the replay's."""
    if not isinstance(recorded, dict):
        return False
    validated, error = validate_arguments(tool, recorded)
    if error is None and validated == given:
        return True
    return plain(validated if error is None else recorded) == plain(given)
