"""Drawing a run's events: live for people, JSON lines for scripts.

`LiveRenderer` prints one line per step (agent, tool call with arguments and outcome,
delegation, artifact change) and the answer; a subagent's lines are indented and tagged with
its name. Piped (stdout not a terminal), the answer streams as its deltas arrive, plain; when
several agents stream at once, a switch of speaker starts a new line. On a terminal each model
call's text is rendered as Markdown (rich) once the call ends, and a spinner line shows the
step being waited on with its elapsed time (`spinner.WaitLine`). `JsonRenderer` writes `event.model_dump_json()` per line and nothing else to stdout.
`summary` is the one-line description `artifactflow events` shows for a stored event.
"""

from __future__ import annotations

import sys
from typing import Protocol, TextIO

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from ..events import payloads
from ..events.envelope import Event
from ..events.status import Outcome
from ..hooks.types import LEAD_INVOCATION as LEAD
from .spinner import WaitLine
from .text import short


def seconds(ms: float | None) -> str:
    if ms is None:
        return "?"
    return f"{ms / 1000:.1f} s" if ms >= 1000 else f"{ms:.0f} ms"


def closing_line(data: payloads.CompleteData) -> str:
    metrics = data.metrics
    tokens = metrics.get("tokens") or {}
    parts = [seconds(metrics.get("wall_ms"))]
    if tokens:
        text = (
            f"{_tokens(tokens.get('total'))} tokens ({_tokens(tokens.get('prompt'))} prompt + "
            f"{_tokens(tokens.get('completion'))} completion)"
        )
        if tokens.get("estimated_calls"):
            n = tokens["estimated_calls"]
            text = f"~{text} ({n} call{'' if n == 1 else 's'} estimated: no usage sent)"
        unreported = tokens.get("unreported_calls") or 0
        if unreported and tokens.get("total") is not None:
            text += f" + n/a for {unreported} call{'' if unreported == 1 else 's'} without usage"
        parts.append(text)
    if metrics.get("cost_usd") is not None:
        parts.append(f"${metrics['cost_usd']:.4f}" + ("" if metrics.get("cost_complete", True) else "+"))
    conversation = metrics.get("conversation") or {}
    if conversation.get("messages", 0) > 1:
        cost = conversation.get("cost_usd")
        parts.append(
            f"conversation: {conversation['tokens']['total']} tokens"
            + (f", ${cost:.4f}" if cost is not None else "")
        )
    llm_calls, tool_calls = metrics.get("llm_calls"), metrics.get("tool_calls")
    if llm_calls is not None:
        parts.append(f"{llm_calls} LLM call{'' if llm_calls == 1 else 's'}")
    if tool_calls is not None:
        parts.append(f"{tool_calls} tool call{'' if tool_calls == 1 else 's'}")
    return " · ".join(parts)


def _result_text(data: payloads.ToolCompleteData) -> str:
    if data.success:
        return short(data.result.data, 80)
    return short(data.result.error or "failed", 120)


def compaction_text(data: payloads.ContextCompactedData) -> str:
    what = (
        f"{data.messages_summarized} earlier messages summarized"
        if data.scope == "history"
        else f"{data.rounds_summarized} rounds summarized"
    )
    return f"{data.tokens_before:,} → {data.tokens_after:,} tokens, {what}"


def recall_text(data: payloads.MemoryRecalledData) -> str:
    chunks = len(data.knowledge_ids)
    memories = len(data.ids) - chunks
    what = f"{memories} memor{'y' if memories == 1 else 'ies'}" + (f", {chunks} passages" if chunks else "")
    return f"{what} · profile {data.profile} ({data.mode}) · {data.tokens:,} tokens"


def _tokens(value: int | None) -> str:
    return "n/a" if value is None else str(value)


def summary(event: Event) -> str:
    """A one-line description of an event (for `artifactflow events`)."""
    match event.data:
        case payloads.MetadataData() as d:
            return "recovered after a crash" if d.recovered else short(d.content)
        case payloads.AgentStartData() as d:
            return f"round {d.round}"
        case payloads.LLMChunkData() as d:
            return repr(d.delta)
        case payloads.LLMCompleteData() as d:
            names = ", ".join(c.name for c in d.tool_calls)
            text = f"{_tokens(d.usage.prompt_tokens)}+{_tokens(d.usage.completion_tokens)} tokens"
            return text + (f", calls {names}" if names else f", {short(d.content, 60)!r}")
        case payloads.AgentCompleteData() as d:
            return f"{d.outcome or 'done'}, {d.tool_calls} tool call(s)"
        case payloads.ToolStartData() as d:
            return f"{d.tool} {short(d.arguments, 80)}"
        case payloads.ToolCompleteData() as d:
            mark = "✓" if d.success else "✗"
            return f"{mark} {d.tool} ({seconds(d.duration_ms)}) {_result_text(d)}"
        case payloads.PermissionRequestData() as d:
            return "waiting for " + ", ".join(f"{c.tool} ({c.tool_call_id})" for c in d.calls)
        case payloads.PermissionResultData() as d:
            return ", ".join(f"{x.tool}: {x.action}" for x in d.decisions)
        case payloads.SubagentStartData() as d:
            return short(d.instruction)
        case payloads.SubagentCompleteData() as d:
            return f"{d.status}" + (f": {short(d.error)}" if d.error else "")
        case payloads.ArtifactCreatedData() | payloads.ArtifactUpdatedData() as d:
            return f"{d.artifact_id} v{d.version} {short(d.title, 60)}"
        case payloads.WorkflowNodeCompleteData() as d:
            return f"{d.execution} {d.status} {short(d.error or d.output_summary, 60)}"
        case payloads.WorkflowNodeStartData() as d:
            return f"{d.execution} {d.role}"
        case payloads.HandoffData() as d:
            return f"{d.from_agent} → {d.to_agent} ({d.by}) {short(d.message, 60)}"
        case payloads.CompleteData() as d:
            return f"{d.outcome} · {closing_line(d)} · {short(d.response, 60)!r}"
        case payloads.ContextCompactedData() as d:
            return compaction_text(d)
        case payloads.MemoryRecalledData() as d:
            return recall_text(d)
        case payloads.CancelledData() as d:
            return f"partial answer: {short(d.partial_response, 60)!r}"
        case payloads.ErrorData() as d:
            return short(d.message, 200)
    return short(event.data.to_dict())


class Renderer(Protocol):
    def event(self, event: Event) -> None: ...

    def break_line(self) -> None:
        """End a half-printed streamed line (before an out-of-band notice)."""

    def cancelling(self) -> None:
        """The run is being cancelled (Ctrl-C): say so while waiting, print nothing."""

    def idle(self) -> None:
        """Nothing is awaited any more (a prompt follows, or the stream ended)."""


class JsonRenderer:
    """One JSON object per line on stdout, every event including `llm_chunk`; the one-line
    reason of a failure or cancellation goes to stderr."""

    def __init__(self, err: Console, out: TextIO | None = None) -> None:
        self.err = err
        self.out = out

    def break_line(self) -> None:
        pass

    def cancelling(self) -> None:
        pass

    def idle(self) -> None:
        pass

    def event(self, event: Event) -> None:
        out = self.out or sys.stdout
        out.write(event.model_dump_json() + "\n")
        out.flush()
        if isinstance(event.data, payloads.ErrorData):
            self.err.print(Text(f"✗ run failed: {short(event.data.message, 300)}"))
        elif isinstance(event.data, payloads.CancelledData):
            self.err.print(f"✗ cancelled · partial answer saved on message {event.message_id}")


class LiveRenderer:
    """Human output: the streamed answer plus one line per step (see module docstring)."""

    def __init__(self, out: Console, err: Console) -> None:
        self.out = out
        self.err = err
        self.markdown = out.is_terminal  # rich: a TTY, or TTY_COMPATIBLE=1 / FORCE_COLOR set
        self.waiting = WaitLine(out) if out.is_terminal and out.is_interactive else None
        self._lane: str | None = None  # invocation whose streamed text is on the open line
        self._at_line_start = True
        self._lead_text: list[str] = []
        self._buffers: dict[str, list[str]] = {}  # terminal: each lane's text until its call ends

    # --- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _prefix(event: Event) -> str:
        data = event.data
        invocation = data.invocation if isinstance(data, payloads.AgentEventData) else None
        if invocation in (None, LEAD):
            return ""
        return f"    [{event.agent or invocation}] "

    def _close_stream(self) -> None:
        if self._lane is not None and not self._at_line_start:
            self.out.print()
        self._lane = None
        self._at_line_start = True

    def break_line(self) -> None:
        self._close_stream()
        self.idle()

    def cancelling(self) -> None:
        self._close_stream()
        self._wait("cancelling (Ctrl-C again quits at once)")

    def idle(self) -> None:
        if self.waiting is not None:
            self.waiting.hide()

    def _wait(self, step: str) -> None:
        if self.waiting is not None:
            self.waiting.show(step)

    def _line(self, event: Event, text: str, style: str = "") -> None:
        self._close_stream()
        self.out.print(Text(self._prefix(event) + text, style=style))

    def _print_answer(self, text: str) -> None:
        if self.markdown:
            from rich.markdown import Markdown

            self.out.print(Markdown(text, code_theme="ansi_dark"))
        else:
            self.out.print(Text(text))

    def _flush(self, lane: str, event: Event | None = None) -> None:
        """Terminal: print the text a lane's model call wrote (the lead's as Markdown)."""
        text = "".join(self._buffers.pop(lane, ()))
        if not text.strip():
            return
        if lane == LEAD:
            self._print_answer(text.strip("\n"))
        else:
            prefix = f"    [{event.agent if event is not None and event.agent else lane}] "
            for line in text.strip("\n").splitlines():
                self.out.print(Text(prefix, style="dim") + Text(line, style="dim"))

    def _flush_all(self) -> None:
        for lane in list(self._buffers):
            self._flush(lane)

    def _stream(self, event: Event, d: payloads.LLMChunkData) -> None:
        delta = d.delta
        lane = d.invocation or LEAD
        if lane == LEAD:
            self._lead_text.append(delta)
        if self.markdown:
            self._buffers.setdefault(lane, []).append(delta)
            self._wait("writing" if lane == LEAD else f"{event.agent or 'subagent'} writing")
            return
        if lane != self._lane:
            self._close_stream()
            self._lane = lane
        prefix, style = self._prefix(event), ("" if lane == LEAD else "dim")
        for piece in delta.splitlines(keepends=True):
            if self._at_line_start and prefix:
                self.out.print(Text(prefix, style="dim"), end="")
            self.out.print(Text(piece, style=style), end="")
            self._at_line_start = piece.endswith("\n")

    # --- events ----------------------------------------------------------------------------

    def event(self, event: Event) -> None:
        match event.data:
            case payloads.MetadataData() as d:
                what = "recovered run" if d.recovered else "conversation"
                self.out.print(f"[dim]{what} {event.conversation_id} · message {event.message_id}[/dim]")
                self._wait("starting")
            case payloads.AgentStartData() as d:
                self._on_agent_start(event, d)
            case payloads.LLMChunkData() as d:
                self._stream(event, d)
            case payloads.LLMCompleteData() as d:
                self._close_stream()
                self._flush(d.invocation or LEAD, event)
            case payloads.AgentCompleteData():
                self._close_stream()
            case payloads.PermissionRequestData():
                self._close_stream()
                self._flush_all()
                self.idle()  # a prompt or the pause notice follows
            case payloads.ToolStartData() as d:
                self._on_tool_start(event, d)
                self._wait(f"running {d.tool}")
            case payloads.ToolCompleteData() as d:
                self._on_tool_complete(event, d)
                self._wait("thinking")
            case payloads.PermissionResultData() as d:
                self._on_permission_result(event, d)
            case payloads.SubagentStartData() as d:
                self._line(event, f"↳ delegated: {short(d.instruction)}", "magenta")
                self._wait(f"{event.agent or 'subagent'} working")
            case payloads.SubagentCompleteData() as d:
                self._on_subagent_complete(event, d)
                self._wait("thinking")
            case payloads.ArtifactCreatedData() as d:
                self._line(
                    event, f"◆ artifact {d.artifact_id} created (v{d.version}) · {short(d.title, 60)}", "yellow"
                )
            case payloads.ArtifactUpdatedData() as d:
                self._line(event, f"◆ artifact {d.artifact_id} updated → v{d.version}", "yellow")
            case payloads.WorkflowNodeStartData() as d:
                self._line(event, f"▶ {d.execution} [{d.role}]", "bold")
            case payloads.WorkflowNodeCompleteData() as d:
                self._on_workflow_node_complete(event, d)
            case payloads.HandoffData() as d:
                note = f": {short(d.message, 80)}" if d.message else ""
                self._line(event, f"⇢ {d.from_agent} hands over to {d.to_agent}{note}", "cyan")
            case payloads.ContextCompactedData() as d:
                self._line(event, f"⋯ context compacted: {compaction_text(d)}", "dim")
            case payloads.MemoryRecalledData() as d:
                self._line(event, f"⋯ recalled {recall_text(d)}", "dim")
            case payloads.CompleteData() as d:
                self._on_complete(d)
            case payloads.CancelledData() as d:
                self._on_cancelled(event, d)
            case payloads.ErrorData() as d:
                self._close_stream()
                self._flush_all()
                self.idle()
                self.err.print(Text(f"✗ run failed: {short(d.message, 300)}", style="red"))

    def _on_agent_start(self, event: Event, d: payloads.AgentStartData) -> None:
        lead = d.invocation in (None, LEAD)
        if lead:
            self._lead_text = []
        label = event.agent if lead else "working"
        self._line(event, f"● {label}" + (f" · round {d.round}" if d.round != 1 else ""), "bold blue")
        self._wait("thinking" if lead else f"{event.agent or 'subagent'} thinking")

    def _on_tool_start(self, event: Event, d: payloads.ToolStartData) -> None:
        edited = " (edited)" if d.edited else ""
        self._line(event, f"  → {d.tool} {short(d.arguments, 120)}{edited}", "cyan")

    def _on_tool_complete(self, event: Event, d: payloads.ToolCompleteData) -> None:
        if d.success:
            text = f"  ✓ {d.tool} · {seconds(d.duration_ms)}"
            result = _result_text(d)
            self._line(event, text + (f" · {result}" if result else ""), "green")
        else:
            label = "denied" if d.denied else "failed"
            self._line(event, f"  ✗ {d.tool} {label} · {_result_text(d)}", "red")

    def _on_permission_result(self, event: Event, d: payloads.PermissionResultData) -> None:
        for decision in d.decisions:
            reason = f": {decision.reason}" if decision.reason else ""
            style = "red" if decision.action == "deny" else "green"
            self._line(
                event,
                f"  {decision.action} {decision.tool} ({decision.tool_call_id}){reason}",
                style,
            )

    def _on_subagent_complete(self, event: Event, d: payloads.SubagentCompleteData) -> None:
        if d.status == "failed":
            self._line(event, f"↳ failed: {short(d.error)}", "red")
        else:
            self._line(event, "↳ finished", "magenta")

    def _on_workflow_node_complete(self, event: Event, d: payloads.WorkflowNodeCompleteData) -> None:
        ok = d.status == "ok"
        detail = f": {short(d.error)}" if d.error else f" → {short(d.output_summary, 80)}"
        self._line(event, f"{'✓' if ok else '✗'} {d.execution} {d.status}{detail}", "green" if ok else "yellow")

    def _on_complete(self, d: payloads.CompleteData) -> None:
        self._close_stream()
        self._flush_all()
        self.idle()
        response = d.response or ""
        if response.strip() and response.strip() != "".join(self._lead_text).strip():
            self._print_answer(response)  # not streamed (e.g. a limit notice): show it
        if d.outcome == Outcome.MAX_TOOL_ROUNDS:
            self.out.print(f"[yellow]⚠ stopped at max_tool_rounds[/yellow] · {escape(closing_line(d))}")
        elif d.outcome in (Outcome.BUDGET_EXCEEDED, Outcome.LOOP_DETECTED):
            self.out.print(
                f"[yellow]⚠ stopped: {escape(d.reason or d.outcome)}[/yellow]"
                f" · {escape(closing_line(d))}"
            )
        else:
            self.out.print(f"[green]✓ done[/green] · {escape(closing_line(d))}")

    def _on_cancelled(self, event: Event, d: payloads.CancelledData) -> None:
        self._close_stream()
        self._flush_all()
        self.idle()
        partial = d.partial_response or ""
        self.err.print(
            f"[yellow]✗ cancelled[/yellow] · partial answer saved ({len(partial)} characters) "
            f"on message {event.message_id}"
        )
