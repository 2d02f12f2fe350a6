"""Our events as LangGraph's super-steps of the lead graph, so history, state, forks and the
`tasks`/`checkpoints`/`debug`/`events` stream modes see a checkpoint per step.

A message (one turn) is: its input, then nodes one after another: `lead_agent` (one model
call of the lead) and `tool_execution` (one round of the lead's tool calls). Each node that
finishes is a step; its writes are the messages it added. The steps are read off the event
log, which the engine writes in the same transaction as the step's effects, so every step of
every message stays readable for as long as the message exists (no checkpoint GC applies):

- step 0 of message M: after its input (checkpoint id `M:0`, next `lead_agent`);
- step k: after the k-th node (id `M:k`); the message's last step is also `M` itself (the
  id a fork after the turn uses, and the thread's head).

`StepTracker.feed(event)` returns the node transitions an event causes: `("enter", node)`,
then `("exit", node, writes)` when the node finishes (the next node starts, or the run ends).
A pause for approval ends no node: the tool round it asks for starts after the resume.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..events.envelope import Event, EventType
from .convert import LEAD, MessageBuilder, cut_off, message_messages, written_whole

LEAD_NODE = "lead_agent"
TOOL_NODE = "tool_execution"
END_TYPES = (EventType.COMPLETE, EventType.ERROR, EventType.CANCELLED)


@dataclass
class Transition:
    kind: str  # "enter" | "exit"
    node: str
    step: int  # the step the node runs as (LangGraph's `langgraph_step`)
    writes: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)  # the message's, after an exit


def step_id(message_id: str, step: int) -> str:
    return f"{message_id}:{step}"


def parse_step_id(checkpoint_id: str) -> tuple[str, int | None]:
    """(message id, step) for `M:k`; (M, None) for a message id."""
    head, _, tail = checkpoint_id.rpartition(":")
    if head and tail.isdigit():
        return head, int(tail)
    return checkpoint_id, None


class StepTracker:
    """Follows one message's events as nodes and steps; `builder` holds its messages so far."""

    def __init__(self, message: dict[str, Any]) -> None:
        self.builder = MessageBuilder(message)
        self.node: str | None = None
        self.step = 0  # the last finished step (0: the input)
        self.pending: list[dict[str, Any]] = []  # the current node's writes so far

    def _enter(self, node: str) -> list[Transition]:
        out = self._exit() if self.node not in (None, node) else []
        if self.node != node:
            self.node = node
            out.append(Transition("enter", node, self.step + 1))
        return out

    def _exit(self, error: str | None = None) -> list[Transition]:
        if self.node is None:
            return []
        self.step += 1
        done = Transition(
            "exit", self.node, self.step, self.pending, error, list(self.builder.messages)
        )
        self.node, self.pending = None, []
        return [done]

    def feed(self, event: Event) -> tuple[list[Transition], list[dict[str, Any]]]:
        """The transitions `event` causes and the messages it adds."""
        invocation = getattr(event.data, "invocation", None) or LEAD
        out: list[Transition] = []
        lead = invocation == LEAD
        if lead and event.type in (EventType.LLM_CHUNK, EventType.LLM_COMPLETE):
            out += self._enter(LEAD_NODE)
        elif lead and event.type in (EventType.TOOL_START, EventType.TOOL_COMPLETE):
            out += self._enter(TOOL_NODE)
        if event.type == EventType.LLM_CHUNK:
            return out, []
        added = self.builder.add(event)
        if added and self.node is None and event.type == EventType.COMPLETE:
            out += self._enter(LEAD_NODE)  # a workflow's answer: one node that wrote it
        self.pending += added
        if lead and event.type == EventType.LLM_COMPLETE and cut_off(event):
            self.node, self.pending = None, []  # cancelled mid-call: the node wrote nothing
        elif lead and event.type == EventType.LLM_COMPLETE:
            out += self._exit()  # a model call is a whole node
        elif event.type == EventType.CANCELLED and not self.pending:
            self.node = None  # a node cancelled before it wrote anything is no step
        elif event.type in END_TYPES:
            error = getattr(event.data, "message", None) if event.type == EventType.ERROR else None
            out += self._exit(error)
        return out, added


def message_steps(
    message: dict[str, Any], events: Sequence[Event]
) -> list[tuple[int, str | None, list[dict[str, Any]], list[dict[str, Any]]]]:
    """Each step of a message: (step, node that wrote it or None for the input, writes, the
    message's LangChain messages after it)."""
    tracker = StepTracker(message)
    steps: list[tuple[int, str | None, list[dict[str, Any]], list[dict[str, Any]]]] = [
        (0, None, [tracker.builder.messages[0]], list(tracker.builder.messages))
    ]
    for event in events:
        transitions, _ = tracker.feed(event)
        for t in transitions:
            if t.kind == "exit":
                steps.append((t.step, t.node, t.writes, t.messages))
    if written_whole(message, steps):  # a turn written whole (a state update)
        messages = message_messages(message, events)
        steps.append((1, LEAD_NODE, messages[1:], messages))
    return steps
