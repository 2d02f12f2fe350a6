"""One run's events as the Agent Protocol's stream frames, per stream mode, shaped as
LangGraph's server emits them for the lead graph (nodes `lead_agent`, `tool_execution`).

The node and step structure comes from `steps.StepTracker`; each node that finishes is a
step: `updates` sends `{node: writes}`, `values` the state after it (once per step, so the
run's last state is sent once), `checkpoints` and `debug`'s `checkpoint` the step's
checkpoint (id `<message>:<step>`, readable with `threads.get_state`), `tasks` and `debug`'s
`task`/`task_result` the node's start and result, `events` `on_chain_start`/`on_chain_end`
per node and for the whole graph, with the model's and tools' events inside them.
`messages-tuple` sends each token chunk, then the tool-calling AI message whole (its calls as
`tool_call_chunks`), and each tool message.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ..events.envelope import Event, EventType
from ..events.payloads import ToolCompleteData, ToolStartData
from .convert import LEAD, ai, ai_id, interrupt_of
from .steps import LEAD_NODE, TOOL_NODE, StepTracker, Transition, step_id
from .views import checkpoint

Frame = tuple[str, Any]
JSON = dict[str, Any]


def _now() -> str:
    return datetime.now(UTC).isoformat()


class Frames:
    """Turns one run's events into protocol frames for `modes`."""

    def __init__(
        self,
        modes: Sequence[str],
        *,
        run_id: str,
        thread_id: str,
        message: JSON,
        base: list[JSON],
        prior: Sequence[Event],
        graph_id: str,
        subgraphs: bool = False,
    ) -> None:
        self.subgraphs = subgraphs
        self.modes = set(modes)
        self.run_id, self.thread_id, self.graph_id = run_id, thread_id, graph_id
        self.message_id = message["id"]
        self.base = base
        self.tracker = StepTracker(message)
        for event in prior:
            self.tracker.feed(event)
        self.fresh = not prior
        self.partial: dict[str, str] = {}  # messages mode: the text so far per message id

    @property
    def builder(self) -> Any:
        return self.tracker.builder

    def values(self) -> JSON:
        return {"messages": self.base + self.builder.messages}

    def _meta(self, event: Event | None, node: str) -> JSON:
        return {
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "graph_id": self.graph_id,
            "langgraph_node": node,
            "langgraph_step": self.tracker.step + 1,
            "langgraph_checkpoint_ns": "",
            "agent": event.agent if event is not None else None,
            "ls_provider": "openai",
        }

    def _lc_event(self, kind: str, name: str, node: str, event: Event | None, data: JSON) -> JSON:
        return {
            "event": kind,
            "name": name,
            "run_id": self.run_id,
            "tags": [],
            "metadata": self._meta(event, node),
            "data": data,
        }

    def _checkpoint(
        self, step: int, next_nodes: list[str], writes: JSON | None, values: JSON
    ) -> JSON:
        parent = step_id(self.message_id, step - 1) if step > 0 else None
        return {
            "config": {"configurable": checkpoint(self.thread_id, step_id(self.message_id, step))},
            "parent_config": (
                {"configurable": checkpoint(self.thread_id, parent)} if parent else None
            ),
            "values": values,
            "metadata": {"source": "input" if step == 0 else "loop", "step": step, "writes": writes},
            "next": next_nodes,
            "tasks": [{"id": step_id(self.message_id, step + 1), "name": n} for n in next_nodes],
        }

    def _checkpoint_frames(
        self, step: int, next_nodes: list[str], writes: JSON | None, values: JSON
    ) -> list[Frame]:
        payload = self._checkpoint(step, next_nodes, writes, values)
        out: list[Frame] = []
        if "checkpoints" in self.modes:
            out.append(("checkpoints", payload))
        if "debug" in self.modes:
            out.append(("debug", {"type": "checkpoint", "step": step, "timestamp": _now(),
                                  "payload": payload}))
        return out

    def start(self) -> list[Frame]:
        """The frames before the run's first event: the state it starts from (a new turn's
        input checkpoint) and the graph's start."""
        out: list[Frame] = []
        if "events" in self.modes:
            data = {"input": self.values()}
            out.append(("events", self._lc_event("on_chain_start", "LangGraph", "", None, data)))
        if "values" in self.modes:
            out.append(("values", self.values()))
        if self.fresh:
            out += self._checkpoint_frames(
                0, [LEAD_NODE], {"__start__": self.values()}, self.values()
            )
        return out

    def _task(self, t: Transition) -> JSON:
        return {"id": step_id(self.message_id, t.step), "name": t.node, "triggers": [t.node]}

    def _transition(self, t: Transition, event: Event) -> list[Frame]:
        out: list[Frame] = []
        task = self._task(t)
        if t.kind == "enter":
            start = {**task, "input": self.values()}
            if "tasks" in self.modes:
                out.append(("tasks", start))
            if "debug" in self.modes:
                out.append(("debug", {"type": "task", "step": t.step, "timestamp": _now(),
                                      "payload": start}))
            if "events" in self.modes:
                data = {"input": self.values()}
                out.append(("events", self._lc_event("on_chain_start", t.node, t.node, event, data)))
                if t.node == LEAD_NODE:
                    out.append(("events", self._lc_event(
                        "on_chat_model_start", "ChatOpenAI", t.node, event, {"input": self.values()}
                    )))
            return out
        writes = {"messages": t.writes}
        result = {"id": task["id"], "name": t.node, "error": t.error,
                  "result": [["messages", t.writes]], "interrupts": []}
        if "tasks" in self.modes:
            out.append(("tasks", result))
        if "debug" in self.modes:
            out.append(("debug", {"type": "task_result", "step": t.step, "timestamp": _now(),
                                  "payload": result}))
        if "events" in self.modes:
            out.append(("events", self._lc_event("on_chain_end", t.node, t.node, event,
                                                 {"output": writes})))
        if "updates" in self.modes and t.writes:
            out.append(("updates", {t.node: writes}))
        after = {"messages": self.base + t.messages}  # the state this step ended with
        if "values" in self.modes:
            out.append(("values", after))
        calls = any(m.get("tool_calls") for m in t.writes)
        following = [TOOL_NODE] if t.node == LEAD_NODE and calls else (
            [LEAD_NODE] if t.node == TOOL_NODE else []
        )
        return out + self._checkpoint_frames(t.step, following, {t.node: writes}, after)

    def _chunk(self, event: Event, node: str, invocation: str) -> list[Frame]:
        frames: list[Frame] = []
        ns = "" if invocation == LEAD else f"|{node}:{invocation}"
        msg_id = self.builder.current_ai_id if invocation == LEAD else ai_id(
            self.message_id, 0, invocation
        )
        delta = event.data.delta  # type: ignore[attr-defined]
        chunk = ai(msg_id, delta, chunk=True)
        if "messages-tuple" in self.modes:
            frames.append(("messages" + ns, [chunk, self._meta(event, node)]))
        if "messages" in self.modes:
            if msg_id not in self.partial:
                frames.append(("messages/metadata" + ns, {msg_id: {"metadata": self._meta(event, node)}}))
            self.partial[msg_id] = self.partial.get(msg_id, "") + delta
            frames.append(("messages/partial" + ns, [ai(msg_id, self.partial[msg_id])]))
        if "events" in self.modes:
            frames.append(("events" + ns, self._lc_event(
                "on_chat_model_stream", "ChatOpenAI", node, event, {"chunk": chunk}
            )))
        return frames

    def event(self, event: Event) -> list[Frame]:
        data = event.data
        invocation = getattr(data, "invocation", None) or LEAD
        node = LEAD_NODE if invocation == LEAD else (event.agent or invocation)
        if event.type == EventType.LLM_CHUNK and invocation != LEAD:
            if not self.subgraphs:
                return []  # a subagent's tokens: only with stream_subgraphs
            return self._chunk(event, node, invocation)
        ai_before = self.builder.current_ai_id
        transitions, added = self.tracker.feed(event)
        # the node this event starts (after the one it ends), then its own frames, then the
        # node it completes itself (a model call, the run's end)
        entered = max((i + 1 for i, t in enumerate(transitions) if t.kind == "enter"), default=0)
        frames: list[Frame] = []
        for t in transitions[:entered]:
            frames += self._transition(t, event)
        if event.type == EventType.LLM_CHUNK:
            return frames + self._chunk(event, node, invocation)
        frames += self._messages(event, added, ai_before)
        frames += self._model_and_tool_events(event, added)
        for t in transitions[entered:]:
            frames += self._transition(t, event)
        if event.type == EventType.PERMISSION_REQUEST:
            frames += self._interrupt(event)
        if event.type == EventType.ERROR:
            frames.append(("error", {"error": getattr(data, "kind", None) or "Error",
                                     "message": getattr(data, "message", "")}))
        if event.is_final and event.type != EventType.PERMISSION_REQUEST and "events" in self.modes:
            out = {"output": self.values()}
            frames.append(("events", self._lc_event("on_chain_end", "LangGraph", "", event, out)))
        if "custom" in self.modes and event.type != EventType.METADATA:
            frames.append(("custom", {"type": str(event.type), "event_id": event.event_id,
                                      "agent": event.agent, "data": data.to_dict()}))
        return frames

    def _messages(self, event: Event, added: list[JSON], ai_id_now: str) -> list[Frame]:
        frames: list[Frame] = []
        for message in added:
            if "messages-tuple" in self.modes and message["type"] == "tool":
                frames.append(("messages", [message, self._meta(event, TOOL_NODE)]))
            if "messages-tuple" in self.modes and message["type"] == "ai" and message["tool_calls"]:
                # the tool-calling message whole: its text was streamed, its calls were not
                whole = ai(ai_id_now, "", chunk=True)
                whole["tool_calls"] = message["tool_calls"]
                whole["tool_call_chunks"] = [
                    {"name": c["name"], "args": _json(c["args"]), "id": c["id"], "index": i,
                     "type": "tool_call_chunk"}
                    for i, c in enumerate(message["tool_calls"])
                ]
                frames.append(("messages", [whole, self._meta(event, LEAD_NODE)]))
            if "messages" in self.modes and message["type"] == "ai":
                frames.append(("messages/complete", [message]))
        return frames

    def _model_and_tool_events(self, event: Event, added: list[JSON]) -> list[Frame]:
        if "events" not in self.modes:
            return []
        data = event.data
        if event.type == EventType.LLM_COMPLETE and added:
            return [("events", self._lc_event("on_chat_model_end", "ChatOpenAI", LEAD_NODE, event,
                                              {"output": added[0]}))]
        if isinstance(data, ToolStartData):
            return [("events", self._lc_event("on_tool_start", data.tool, TOOL_NODE, event,
                                              {"input": data.arguments}))]
        if isinstance(data, ToolCompleteData):
            return [("events", self._lc_event("on_tool_end", data.tool, TOOL_NODE, event,
                                              {"output": data.result.to_dict()}))]
        return []

    def _interrupt(self, event: Event) -> list[Frame]:
        interrupt = interrupt_of(event.data.to_dict())
        frames: list[Frame] = []
        if "updates" in self.modes:
            frames.append(("updates", {"__interrupt__": [interrupt]}))
        if "values" in self.modes:
            frames.append(("values", {**self.values(), "__interrupt__": [interrupt]}))
        task = {"id": step_id(self.message_id, self.tracker.step + 1), "name": TOOL_NODE}
        if "tasks" in self.modes:
            frames.append(("tasks", {**task, "input": self.values(), "triggers": [TOOL_NODE]}))
            frames.append(("tasks", {**task, "error": None, "result": [],
                                     "interrupts": [interrupt]}))
        return frames


def _json(value: Any) -> str:
    return json.dumps(value, default=str)
