"""OpenTelemetry tracing as a hook, following the GenAI semantic conventions.

Spans: `invoke_agent {agent}` per agent invocation (the lead's is the run's root),
`chat {model}` per model call and `execute_tool {tool}` per tool call, nested lead →
subagent → chat / execute_tool. Every span carries `gen_ai.operation.name` and
`gen_ai.conversation.id`; model spans the provider, request and response models and token
usage; tool spans the tool name and call id. Failures set error status and `error.type`.

Contents (messages, arguments, results) are recorded only when asked (`capture_content`
or `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`), as the conventions advise.

Parents are passed explicitly (`context=`), never taken from the ambient context: the agent
nodes run parallel subagents in separate asyncio tasks, and spans must nest the same way
whichever task fires the hook. A run that pauses ends its spans and hands the W3C
`traceparent` of each open invocation to the controller (`trace_context`), which stores it
with the paused message; the resumed segment, in any process, opens its spans as children
of those, so one request reads as one trace.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from . import types as ht
from .base import Hooks

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
SUBAGENT_TOOL = "call_subagent"
DEFAULT_PROVIDER = "openai"  # the wire protocol every configured endpoint speaks
_propagator = TraceContextTextMapPropagator()


@dataclass
class _RunSpans:
    root: Span
    conversation_id: str
    agents: dict[str, Span] = field(default_factory=dict)
    chats: dict[str, Span] = field(default_factory=dict)
    tools: dict[str, Span] = field(default_factory=dict)
    stored: dict[str, str] = field(default_factory=dict)  # invocation → traceparent (resume)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _context_of(traceparent: str | None, tracestate: str | None = None) -> Context | None:
    if not traceparent:
        return None
    carrier = {"traceparent": traceparent}
    if tracestate:
        carrier["tracestate"] = tracestate
    context = _propagator.extract(carrier)
    span = trace.get_current_span(context)
    return context if span.get_span_context().is_valid else None


class TracingHooks(Hooks):
    """Records a run as OpenTelemetry spans. Pass the `TracerProvider` to use (the global
    one otherwise); `close()` shuts down a provider this hook was given to own."""

    name = "tracing"

    def __init__(
        self,
        tracer_provider: Any = None,
        *,
        capture_content: bool | None = None,
        owns_provider: bool = False,
    ) -> None:
        self.provider = tracer_provider
        self.owns_provider = owns_provider
        provider = tracer_provider or trace.get_tracer_provider()
        self.tracer = provider.get_tracer("artifactflow", _version())
        if capture_content is None:
            capture_content = os.environ.get(CAPTURE_ENV, "").strip().lower() in ("1", "true", "yes")
        self.capture_content = capture_content
        self._runs: dict[str, _RunSpans] = {}

    # --- spans ----------------------------------------------------------------------------

    def _start(self, name: str, parent: Span | Context | None, kind: SpanKind, attrs: dict[str, Any]) -> Span:
        context = trace.set_span_in_context(parent) if isinstance(parent, Span) else parent
        clean = {k: v for k, v in attrs.items() if v is not None}
        return self.tracer.start_span(name, context=context, kind=kind, attributes=clean)

    def _agent_span(self, run: ht.RunInfo, spans: _RunSpans, invocation: str, agent: str, step: ht.AgentStep | None = None) -> Span:
        """The invocation's span, opened on first use (also after a resume: as a child of
        the span the paused segment stored for it)."""
        if invocation == "lead":
            return spans.root
        span = spans.agents.get(invocation)
        if span is None:
            parent: Span | Context | None = _context_of(spans.stored.get(invocation)) or spans.root
            span = self._start(
                f"invoke_agent {agent}",
                parent,
                SpanKind.INTERNAL,
                {
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": agent,
                    "gen_ai.conversation.id": run.conversation_id,
                    "gen_ai.provider.name": (step.provider or DEFAULT_PROVIDER) if step else None,
                    "gen_ai.request.model": step.model if step else None,
                    "artifactflow.invocation": invocation,
                    "artifactflow.tool_call_id": step.tool_call_id if step else None,
                    "artifactflow.continued": invocation in spans.stored or None,
                },
            )
            spans.agents[invocation] = span
        return span

    def _spans(self, run: ht.RunInfo) -> _RunSpans:
        spans = self._runs.get(run.message_id)
        if spans is None:  # a hook fired before on_run_start (not wired): open the root now
            self._open_run(run)
            spans = self._runs[run.message_id]
        return spans

    def _open_run(self, run: ht.RunInfo) -> None:
        stored = dict(run.trace_context or {})
        parent = _context_of(stored.get("traceparent"), stored.get("tracestate"))
        root = self._start(
            f"invoke_agent {run.lead_agent}",
            parent,
            SpanKind.INTERNAL,
            {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": run.lead_agent,
                "gen_ai.conversation.id": run.conversation_id,
                "artifactflow.message_id": run.message_id,
                "artifactflow.invocation": "lead",
                "artifactflow.run.segment": run.segment,
            },
        )
        if self.capture_content and run.segment == "new":
            root.set_attribute("gen_ai.input.messages", _json([{"role": "user", "content": run.content}]))
        invocations = stored.get("invocations")
        self._runs[run.message_id] = _RunSpans(
            root, run.conversation_id, stored=dict(invocations) if isinstance(invocations, dict) else {}
        )

    # --- run ------------------------------------------------------------------------------

    async def on_run_start(self, run: ht.RunInfo) -> None:
        old = self._runs.pop(run.message_id, None)
        if old is not None:  # a segment this process never closed
            self._end_all(old, {"artifactflow.abandoned": True})
        self._open_run(run)

    async def on_run_end(self, run: ht.RunInfo, end: ht.RunEnd) -> None:
        spans = self._runs.pop(run.message_id, None)
        if spans is None:
            return
        spans.root.set_attribute("artifactflow.run.status", end.status)
        if end.outcome:
            spans.root.set_attribute("artifactflow.run.outcome", end.outcome)
        if end.status == "failed":
            spans.root.set_status(Status(StatusCode.ERROR, end.error or "run failed"))
            spans.root.set_attribute("error.type", "run_failed")
        if self.capture_content and end.response:
            spans.root.set_attribute("gen_ai.output.messages", _json([{"role": "assistant", "content": end.response}]))
        extra = {"artifactflow.paused": True} if end.status == "waiting" else {}
        self._end_all(spans, extra)

    def _end_all(self, spans: _RunSpans, attrs: dict[str, Any]) -> None:
        for group in (spans.tools, spans.chats, spans.agents):
            for span in group.values():
                for key, value in attrs.items():
                    span.set_attribute(key, value)
                span.end()
            group.clear()
        for key, value in attrs.items():
            spans.root.set_attribute(key, value)
        spans.root.end()

    def trace_context(self, run: ht.RunInfo) -> dict[str, Any] | None:
        """W3C trace context of the run's open invocations, to store with a paused message.
        Call it before `on_run_end`, while the spans are open."""
        spans = self._runs.get(run.message_id)
        if spans is None:
            return None
        carrier: dict[str, Any] = {}
        _propagator.inject(carrier, context=trace.set_span_in_context(spans.root))
        invocations: dict[str, str] = {}
        for invocation, span in spans.agents.items():
            inner: dict[str, str] = {}
            _propagator.inject(inner, context=trace.set_span_in_context(span))
            if "traceparent" in inner:
                invocations[invocation] = inner["traceparent"]
        if invocations:
            carrier["invocations"] = invocations
        return carrier or None

    async def on_error(self, run: ht.RunInfo, failure: ht.Failure) -> None:
        spans = self._runs.get(run.message_id)
        if spans is None:
            return
        invocation = failure.agent.invocation if failure.agent else "lead"
        if failure.scope == "model":
            targets = [spans.chats.pop(invocation, None)]
        elif failure.scope == "agent":
            targets = [spans.chats.pop(invocation, None), spans.agents.pop(invocation, None)]
        else:
            targets = [spans.root]
        for span in filter(None, targets):
            if failure.error is not None:
                span.record_exception(failure.error)
            span.set_status(Status(StatusCode.ERROR, failure.message))
            span.set_attribute("error.type", failure.kind or (type(failure.error).__name__ if failure.error else "error"))
            if span is not spans.root:
                span.end()

    async def on_permission_request(self, run: ht.RunInfo, request: ht.PermissionRequest) -> None:
        spans = self._runs.get(run.message_id)
        if spans is not None:
            spans.root.add_event(
                "permission_request",
                {"gen_ai.tool.call.id": [c.id for c in request.calls], "gen_ai.tool.name": [c.name for c in request.calls]},
            )

    async def on_permission_result(self, run: ht.RunInfo, result: ht.PermissionResult) -> None:
        spans = self._spans(run)
        spans.root.add_event(
            "permission_result",
            {
                "gen_ai.tool.call.id": [d.tool_call_id for d in result.decisions],
                "artifactflow.decision": [d.action for d in result.decisions],
            },
        )

    # --- agents and model calls -------------------------------------------------------------

    async def on_agent_start(self, run: ht.RunInfo, agent: ht.AgentStep) -> None:
        spans = self._spans(run)
        span = self._agent_span(run, spans, agent.invocation, agent.name, agent)
        if agent.is_lead:
            if agent.model:
                span.set_attribute("gen_ai.request.model", agent.model)
            span.set_attribute("gen_ai.provider.name", agent.provider or DEFAULT_PROVIDER)

    async def on_agent_end(self, run: ht.RunInfo, agent: ht.AgentStep, end: ht.AgentStepEnd) -> None:
        spans = self._runs.get(run.message_id)
        if spans is None or agent.is_lead or not end.finishes_invocation:
            return
        span = spans.agents.pop(agent.invocation, None)
        if span is None:
            return
        span.set_attribute("artifactflow.outcome", end.outcome or "")
        if end.outcome == "failed":
            span.set_status(Status(StatusCode.ERROR, end.error or "subagent failed"))
            span.set_attribute("error.type", "agent_failed")
        if self.capture_content and end.content:
            span.set_attribute("gen_ai.output.messages", _json([{"role": "assistant", "content": end.content}]))
        span.end()

    async def on_model_start(self, run: ht.RunInfo, agent: ht.AgentStep, request: ht.ModelRequest) -> None:
        spans = self._spans(run)
        parent = self._agent_span(run, spans, agent.invocation, agent.name, agent)
        span = self._start(
            f"chat {request.model}",
            parent,
            SpanKind.CLIENT,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": agent.provider or DEFAULT_PROVIDER,
                "gen_ai.request.model": request.model,
                "gen_ai.agent.name": agent.name,
                "gen_ai.conversation.id": run.conversation_id,
                "artifactflow.round": agent.round,
            },
        )
        if self.capture_content:
            span.set_attribute("gen_ai.input.messages", _json(request.messages))
        spans.chats[agent.invocation] = span

    async def on_model_end(
        self, run: ht.RunInfo, agent: ht.AgentStep, request: ht.ModelRequest, response: ht.ModelResponse
    ) -> None:
        spans = self._runs.get(run.message_id)
        span = spans.chats.pop(agent.invocation, None) if spans else None
        if span is None:
            return
        span.set_attribute("gen_ai.response.model", response.model or request.model)
        span.set_attribute("gen_ai.usage.input_tokens", response.input_tokens)
        span.set_attribute("gen_ai.usage.output_tokens", response.output_tokens)
        if response.finish_reason:
            span.set_attribute("gen_ai.response.finish_reasons", [response.finish_reason])
        if self.capture_content:
            message: dict[str, Any] = {"role": "assistant", "content": response.content}
            if response.tool_calls:
                message["tool_calls"] = list(response.tool_calls)
            span.set_attribute("gen_ai.output.messages", _json([message]))
        span.end()

    async def on_compaction(self, run: ht.RunInfo, agent: ht.AgentStep, compaction: ht.Compaction) -> None:
        spans = self._runs.get(run.message_id)
        if spans is not None:
            self._agent_span(run, spans, agent.invocation, agent.name, agent).add_event(
                "context_compacted",
                {
                    "artifactflow.tokens_before": compaction.tokens_before,
                    "artifactflow.tokens_after": compaction.tokens_after,
                    "artifactflow.rounds_summarized": compaction.rounds_summarized,
                },
            )

    async def on_memory_recall(self, run: ht.RunInfo, agent: ht.AgentStep, recall: ht.MemoryRecall) -> None:
        spans = self._runs.get(run.message_id)
        if spans is None:
            return
        span = self._agent_span(run, spans, agent.invocation, agent.name, agent)
        attributes: dict[str, Any] = {
            "artifactflow.memory.ids": list(recall.ids),
            "artifactflow.memory.profile": recall.profile,
            "artifactflow.memory.mode": recall.mode,
            "artifactflow.memory.tokens": recall.tokens,
        }
        span.set_attributes(attributes)
        span.add_event("memory_recalled", attributes)

    # --- tools ----------------------------------------------------------------------------

    def _tool_span(self, run: ht.RunInfo, spans: _RunSpans, call: ht.ToolCall) -> Span:
        parent = self._agent_span(run, spans, call.invocation, call.agent)
        span = self._start(
            f"execute_tool {call.name}",
            parent,
            SpanKind.INTERNAL,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": call.name,
                "gen_ai.tool.call.id": call.id,
                "gen_ai.tool.type": "function",
                "gen_ai.conversation.id": run.conversation_id,
                "gen_ai.agent.name": call.agent,
            },
        )
        if self.capture_content:
            span.set_attribute("gen_ai.tool.call.arguments", call.arguments_json())
        return span

    async def on_tool_start(self, run: ht.RunInfo, call: ht.ToolCall) -> None:
        spans = self._spans(run)
        spans.tools[call.key] = self._tool_span(run, spans, call)

    async def on_tool_end(self, run: ht.RunInfo, outcome: ht.ToolOutcome) -> None:
        spans = self._spans(run)
        call, result = outcome.call, outcome.result
        span = spans.tools.pop(call.key, None)
        if span is None and call.name == SUBAGENT_TOOL and result.success:
            return  # a subagent's answer: its invoke_agent span already tells that story
        span = span or self._tool_span(run, spans, call)
        if outcome.denied:
            span.set_attribute("artifactflow.tool.denied", True)
        if outcome.refused:
            span.set_attribute("artifactflow.tool.refused", True)
        if not result.success:
            kind = "denied" if outcome.denied else "refused" if outcome.refused else "tool_error"
            span.set_status(Status(StatusCode.ERROR, (result.error or "tool failed")[:200]))
            span.set_attribute("error.type", kind)
        if self.capture_content:
            span.set_attribute("gen_ai.tool.call.result", result.model_text())
        span.end()

    # --- shutdown -------------------------------------------------------------------------

    async def aclose(self) -> None:
        """End what is still open; flush and shut down a provider this hook owns."""
        for spans in list(self._runs.values()):
            self._end_all(spans, {"artifactflow.closed": True})
        self._runs.clear()
        if self.owns_provider and self.provider is not None:
            await asyncio.to_thread(self.provider.shutdown)


def _version() -> str:
    try:
        return importlib.metadata.version("artifactflow")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - bare source tree
        return "0"
