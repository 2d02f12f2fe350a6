"""A run's events as the Agent Protocol's server-sent events, per stream mode.

Every frame is `event: <mode>` / `data: <JSON>`; a frame made from a stored event carries that
event's id (`id: <event_id>`, increasing) on the last frame it produced, so `Last-Event-ID`
resumes after it; frames from token chunks carry no id (they are never stored, as in our own
API). The first frame is `metadata {run_id, attempt}`.

| mode | made from |
|---|---|
| values | the thread's messages after the input, each model call, each tool result, the end; `__interrupt__` when paused |
| updates | `{node: {"messages": [new]}}` per model call (`lead_agent`) and tool result (`tool_execution`); `{"__interrupt__": [...]}` |
| messages-tuple | `[AIMessageChunk, metadata]` per token chunk (event name `messages`), and each tool message |
| messages | `messages/metadata`, `messages/partial` (the text so far), `messages/complete` |
| events | `on_chat_model_start/stream/end`, `on_tool_start/end` |
| custom | every stored event of ours, as `{type, event_id, agent, data}` (artifacts, subagents, compactions, ...) |
| debug | `{type: "checkpoint" | "task_result", step, timestamp, payload}` |
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

from ..events.envelope import Event, EventType
from ..events.payloads import ToolCompleteData, ToolStartData
from .convert import LEAD, MessageBuilder, ai, ai_id, interrupt_of
from .views import NODE, checkpoint

MODES = (
    "values",
    "updates",
    "messages",
    "messages-tuple",
    "events",
    "custom",
    "debug",
    "tasks",
    "checkpoints",
)
Frame = tuple[str, Any, int | None]


def modes_of(value: Any) -> list[str]:
    modes = [value] if isinstance(value, str) else list(value or ["values"])
    return [m for m in modes if m in MODES] or ["values"]


def sse(name: str, data: Any, event_id: int | None) -> bytes:
    lines = [] if event_id is None else [f"id: {event_id}"]
    lines += [f"event: {name}", "data: " + json.dumps(data, default=str, separators=(",", ":"))]
    return ("\n".join(lines) + "\n\n").encode()


class Frames:
    """Turns one run's events into protocol frames for `modes`."""

    def __init__(
        self,
        modes: Sequence[str],
        *,
        run_id: str,
        thread_id: str,
        message: dict[str, Any],
        base: list[dict[str, Any]],
        prior: Sequence[Event],
        graph_id: str,
    ) -> None:
        self.modes = set(modes)
        self.run_id, self.thread_id, self.graph_id = run_id, thread_id, graph_id
        self.message_id = message["id"]
        self.base = base
        self.builder = MessageBuilder(message)
        for event in prior:
            self.builder.add(event)
        self.partial: dict[str, str] = {}  # messages mode: the text so far per message id
        self.step = len(prior)

    def values(self) -> dict[str, Any]:
        return {"messages": self.base + self.builder.messages}

    def _meta(self, event: Event, node: str) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "graph_id": self.graph_id,
            "langgraph_node": node,
            "langgraph_step": self.step,
            "langgraph_checkpoint_ns": "",
            "agent": event.agent,
            "ls_provider": "openai",
        }

    def start(self) -> list[Frame]:
        frames: list[Frame] = [("metadata", {"run_id": self.run_id, "attempt": 1}, None)]
        if "values" in self.modes:
            frames.append(("values", self.values(), None))
        return frames

    def event(self, event: Event) -> list[Frame]:
        frames: list[Frame] = []
        data = event.data
        invocation = getattr(data, "invocation", None) or LEAD
        node = "lead_agent" if invocation == LEAD else (event.agent or invocation)
        if event.type == EventType.LLM_CHUNK:
            msg_id = (
                self.builder.current_ai_id
                if invocation == LEAD
                else ai_id(self.message_id, 0, invocation)
            )
            delta = data.delta  # type: ignore[attr-defined]
            chunk = ai(msg_id, delta, chunk=True)
            if "messages-tuple" in self.modes:
                frames.append(("messages", [chunk, self._meta(event, node)], None))
            if "messages" in self.modes:
                if msg_id not in self.partial:
                    frames.append(
                        ("messages/metadata", {msg_id: {"metadata": self._meta(event, node)}}, None)
                    )
                self.partial[msg_id] = self.partial.get(msg_id, "") + delta
                frames.append(("messages/partial", [ai(msg_id, self.partial[msg_id])], None))
            if "events" in self.modes:
                frames.append(
                    (
                        "events",
                        self._lc_event("on_chat_model_stream", node, event, {"chunk": chunk}),
                        None,
                    )
                )
            return frames
        self.step += 1
        before = len(self.builder.messages)
        msg_id = self.builder.current_ai_id
        added = self.builder.add(event)
        if added and "updates" in self.modes:
            update_node = NODE if event.type == EventType.TOOL_COMPLETE else node
            frames.append(("updates", {update_node: {"messages": added}}, None))
        for message in added:
            if "messages-tuple" in self.modes and message["type"] == "tool":
                frames.append(("messages", [message, self._meta(event, NODE)], None))
            if "messages" in self.modes and message["type"] == "ai":
                frames.append(("messages/complete", [message], None))
        if "events" in self.modes:
            if event.type == EventType.AGENT_START and invocation == LEAD:
                frames.append(
                    ("events", self._lc_event("on_chat_model_start", node, event, {}), None)
                )
            elif event.type == EventType.LLM_COMPLETE and added:
                frames.append(
                    (
                        "events",
                        self._lc_event("on_chat_model_end", node, event, {"output": added[0]}),
                        None,
                    )
                )
            elif isinstance(data, ToolStartData):
                start = self._lc_event("on_tool_start", NODE, event, {"input": data.arguments})
                frames.append(("events", start, None))
            elif isinstance(data, ToolCompleteData):
                output = {"output": data.result.to_dict()}
                frames.append(("events", self._lc_event("on_tool_end", NODE, event, output), None))
        if event.type == EventType.PERMISSION_REQUEST:
            interrupt = interrupt_of(data.to_dict())
            if "updates" in self.modes:
                frames.append(("updates", {"__interrupt__": [interrupt]}, None))
            if "values" in self.modes:
                frames.append(("values", {**self.values(), "__interrupt__": [interrupt]}, None))
        elif "values" in self.modes and (added or event.type == EventType.COMPLETE):
            frames.append(("values", self.values(), None))
        if event.type == EventType.ERROR:
            frames.append(
                (
                    "error",
                    {
                        "error": getattr(data, "kind", None) or "Error",
                        "message": getattr(data, "message", ""),
                    },
                    None,
                )
            )
        if "custom" in self.modes and event.type not in (EventType.METADATA,):
            frames.append(
                (
                    "custom",
                    {
                        "type": str(event.type),
                        "event_id": event.event_id,
                        "agent": event.agent,
                        "data": data.to_dict(),
                    },
                    None,
                )
            )
        if "debug" in self.modes and (added or event.is_final):
            frames.append(
                (
                    "debug",
                    {
                        "type": "checkpoint",
                        "step": self.step,
                        "timestamp": datetime.now(UTC).isoformat(),
                        "payload": {
                            "config": {"configurable": checkpoint(self.thread_id, self.message_id)},
                            "values": self.values(),
                            "metadata": {"source": "loop", "step": self.step},
                            "next": [],
                            "tasks": [],
                        },
                    },
                    None,
                )
            )
        del before, msg_id
        if frames:
            name, payload, _ = frames[-1]
            frames[-1] = (name, payload, event.event_id)
        return frames

    def _lc_event(self, kind: str, node: str, event: Event, data: dict[str, Any]) -> dict[str, Any]:
        return {
            "event": kind,
            "name": node,
            "run_id": self.run_id,
            "tags": [],
            "metadata": self._meta(event, node),
            "data": data,
        }


async def frames_of(
    frames: Frames, events: AsyncIterator[Event], *, first: bool
) -> AsyncIterator[bytes]:
    if first:
        for name, data, event_id in frames.start():
            yield sse(name, data, event_id)
    else:
        yield sse("metadata", {"run_id": frames.run_id, "attempt": 1}, None)
    async for event in events:
        for name, data, event_id in frames.event(event):
            yield sse(name, data, event_id)
