"""Drawing a run's events: live for people, JSON lines for scripts.

`LiveRenderer` prints the answer as its deltas arrive and one line per step (agent, tool call
with arguments and outcome, delegation, artifact change); a subagent's lines are indented and
tagged with its name. When several agents stream at once, a switch of speaker starts a new
line. `JsonRenderer` writes `event.model_dump_json()` per line and nothing else to stdout.
`summary` is the one-line description `artifactflow events` shows for a stored event.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Protocol, TextIO

from rich.console import Console
from rich.markup import escape
from rich.text import Text

from ..core.events import Event

LEAD = "lead"


def console(*, stderr: bool = False) -> Console:
    """A console on stdout or stderr that never inserts hard line breaks."""
    return Console(stderr=stderr, soft_wrap=True, highlight=False)


def short(value: Any, limit: int = 100) -> str:
    """`value` as one line of at most `limit` characters."""
    if value is None:
        return ""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = str(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def seconds(ms: float | None) -> str:
    if ms is None:
        return "?"
    return f"{ms / 1000:.1f} s" if ms >= 1000 else f"{ms:.0f} ms"


def closing_line(data: dict[str, Any]) -> str:
    metrics = data.get("metrics") or {}
    tokens = metrics.get("tokens") or {}
    parts = [seconds(metrics.get("wall_ms"))]
    if tokens:
        parts.append(
            f"{tokens.get('total', 0)} tokens ({tokens.get('prompt', 0)} prompt + "
            f"{tokens.get('completion', 0)} completion)"
        )
    llm_calls, tool_calls = metrics.get("llm_calls"), metrics.get("tool_calls")
    if llm_calls is not None:
        parts.append(f"{llm_calls} LLM call{'' if llm_calls == 1 else 's'}")
    if tool_calls is not None:
        parts.append(f"{tool_calls} tool call{'' if tool_calls == 1 else 's'}")
    return " · ".join(parts)


def _result_text(data: dict[str, Any]) -> str:
    result = data.get("result") or {}
    if data.get("success"):
        return short(result.get("data"), 80)
    return short(result.get("error") or "failed", 120)


def summary(event: Event) -> str:
    """A one-line description of an event (for `artifactflow events`)."""
    d = event.data
    match event.type:
        case "metadata":
            return "recovered after a crash" if d.get("recovered") else short(d.get("content"))
        case "agent_start":
            return f"round {d.get('round', '?')}"
        case "llm_chunk":
            return repr(d.get("delta", ""))
        case "llm_complete":
            usage = d.get("usage") or {}
            calls = d.get("tool_calls") or []
            names = ", ".join(c.get("name", "?") for c in calls if isinstance(c, dict))
            text = f"{usage.get('prompt_tokens', 0)}+{usage.get('completion_tokens', 0)} tokens"
            return text + (f", calls {names}" if names else f", {short(d.get('content'), 60)!r}")
        case "agent_complete":
            return f"{d.get('outcome') or 'done'}, {d.get('tool_calls', 0)} tool call(s)"
        case "tool_start":
            return f"{d.get('tool')} {short(d.get('arguments'), 80)}"
        case "tool_complete":
            mark = "✓" if d.get("success") else "✗"
            return f"{mark} {d.get('tool')} ({seconds(d.get('duration_ms'))}) {_result_text(d)}"
        case "permission_request":
            calls = d.get("calls") or []
            return "waiting for " + ", ".join(
                f"{c.get('tool')} ({c.get('tool_call_id')})" for c in calls
            )
        case "permission_result":
            return ", ".join(
                f"{x.get('tool')}: {x.get('action')}" for x in d.get("decisions") or []
            )
        case "subagent_start":
            return short(d.get("instruction"))
        case "subagent_complete":
            return f"{d.get('status')}" + (f": {short(d.get('error'))}" if d.get("error") else "")
        case "artifact_created" | "artifact_updated":
            return f"{d.get('artifact_id')} v{d.get('version')} {short(d.get('title'), 60)}"
        case "workflow_node_start" | "workflow_node_complete":
            return f"{d.get('execution')} {d.get('status', d.get('role'))} {short(d.get('error') or d.get('output_summary') or '', 60)}"
        case "complete":
            return f"{d.get('outcome')} · {closing_line(d)} · {short(d.get('response'), 60)!r}"
        case "cancelled":
            return f"partial answer: {short(d.get('partial_response'), 60)!r}"
        case "error":
            return short(d.get("message"), 200)
    return short(d)


class Renderer(Protocol):
    def event(self, event: Event) -> None: ...

    def break_line(self) -> None:
        """End a half-printed streamed line (before an out-of-band notice)."""


class JsonRenderer:
    """One JSON object per line on stdout, every event including `llm_chunk`; the one-line
    reason of a failure or cancellation goes to stderr."""

    def __init__(self, err: Console, out: TextIO | None = None) -> None:
        self.err = err
        self.out = out

    def break_line(self) -> None:
        pass

    def event(self, event: Event) -> None:
        out = self.out or sys.stdout
        out.write(event.model_dump_json() + "\n")
        out.flush()
        if event.type == "error":
            self.err.print(Text(f"✗ run failed: {short(event.data.get('message'), 300)}"))
        elif event.type == "cancelled":
            self.err.print(f"✗ cancelled · partial answer saved on message {event.message_id}")


class LiveRenderer:
    """Human output: the streamed answer plus one line per step (see module docstring)."""

    def __init__(self, out: Console, err: Console) -> None:
        self.out = out
        self.err = err
        self._lane: str | None = None  # invocation whose streamed text is on the open line
        self._at_line_start = True
        self._lead_text: list[str] = []

    # --- helpers ---------------------------------------------------------------------------

    @staticmethod
    def _prefix(event: Event) -> str:
        invocation = event.data.get("invocation")
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

    def _line(self, event: Event, text: str, style: str = "") -> None:
        self._close_stream()
        self.out.print(Text(self._prefix(event) + text, style=style))

    def _stream(self, event: Event) -> None:
        delta = event.data.get("delta") or ""
        lane = event.data.get("invocation") or LEAD
        if lane == LEAD:
            self._lead_text.append(delta)
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
        handler = getattr(self, f"_on_{event.type}", None)
        if handler is not None:
            handler(event)

    def _on_metadata(self, event: Event) -> None:
        what = "recovered run" if event.data.get("recovered") else "conversation"
        self.out.print(f"[dim]{what} {event.conversation_id} · message {event.message_id}[/dim]")

    def _on_agent_start(self, event: Event) -> None:
        if event.data.get("invocation") in (None, LEAD):
            self._lead_text = []
        round_ = event.data.get("round", 1)
        label = event.agent if event.data.get("invocation") in (None, LEAD) else "working"
        self._line(event, f"● {label}" + (f" · round {round_}" if round_ != 1 else ""), "bold blue")

    def _on_llm_chunk(self, event: Event) -> None:
        self._stream(event)

    def _on_llm_complete(self, event: Event) -> None:
        self._close_stream()

    _on_agent_complete = _on_llm_complete
    _on_permission_request = _on_llm_complete

    def _on_tool_start(self, event: Event) -> None:
        d = event.data
        edited = " (edited)" if d.get("edited") else ""
        self._line(event, f"  → {d.get('tool')} {short(d.get('arguments'), 120)}{edited}", "cyan")

    def _on_tool_complete(self, event: Event) -> None:
        d = event.data
        if d.get("success"):
            text = f"  ✓ {d.get('tool')} · {seconds(d.get('duration_ms'))}"
            result = _result_text(d)
            self._line(event, text + (f" · {result}" if result else ""), "green")
        else:
            label = "denied" if d.get("denied") else "failed"
            self._line(event, f"  ✗ {d.get('tool')} {label} · {_result_text(d)}", "red")

    def _on_permission_result(self, event: Event) -> None:
        for decision in event.data.get("decisions") or []:
            action = decision.get("action")
            reason = f": {decision['reason']}" if decision.get("reason") else ""
            style = "red" if action == "deny" else "green"
            self._line(
                event,
                f"  {action} {decision.get('tool')} ({decision.get('tool_call_id')}){reason}",
                style,
            )

    def _on_subagent_start(self, event: Event) -> None:
        self._line(event, f"↳ delegated: {short(event.data.get('instruction'))}", "magenta")

    def _on_subagent_complete(self, event: Event) -> None:
        d = event.data
        if d.get("status") == "failed":
            self._line(event, f"↳ failed: {short(d.get('error'))}", "red")
        else:
            self._line(event, "↳ finished", "magenta")

    def _on_artifact_created(self, event: Event) -> None:
        d = event.data
        self._line(
            event,
            f"◆ artifact {d.get('artifact_id')} created (v{d.get('version', 1)}) · {short(d.get('title'), 60)}",
            "yellow",
        )

    def _on_artifact_updated(self, event: Event) -> None:
        d = event.data
        self._line(
            event, f"◆ artifact {d.get('artifact_id')} updated → v{d.get('version')}", "yellow"
        )

    def _on_workflow_node_start(self, event: Event) -> None:
        self._line(event, f"▶ {event.data.get('execution')} [{event.data.get('role')}]", "bold")

    def _on_workflow_node_complete(self, event: Event) -> None:
        d = event.data
        detail = f": {short(d.get('error'))}" if d.get("error") else f" → {short(d.get('output_summary'), 80)}"
        self._line(event, f"{'✓' if d.get('status') == 'ok' else '✗'} {d.get('execution')} {d.get('status')}{detail}",
                   "green" if d.get("status") == "ok" else "yellow")

    def _on_complete(self, event: Event) -> None:
        self._close_stream()
        response = event.data.get("response") or ""
        if response.strip() and response.strip() != "".join(self._lead_text).strip():
            self.out.print(Text(response))  # not streamed (e.g. a limit notice): show it
        if event.data.get("outcome") == "max_tool_rounds":
            self.out.print(
                f"[yellow]⚠ stopped at max_tool_rounds[/yellow] · {escape(closing_line(event.data))}"
            )
        else:
            self.out.print(f"[green]✓ done[/green] · {escape(closing_line(event.data))}")

    def _on_cancelled(self, event: Event) -> None:
        self._close_stream()
        partial = event.data.get("partial_response") or ""
        self.err.print(
            f"[yellow]✗ cancelled[/yellow] · partial answer saved ({len(partial)} characters) "
            f"on message {event.message_id}"
        )

    def _on_error(self, event: Event) -> None:
        self._close_stream()
        self.err.print(Text(f"✗ run failed: {short(event.data.get('message'), 300)}", style="red"))
