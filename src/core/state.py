"""The graph state and the one function that turns an agent response into a state update.

Storage discipline (see DESIGN "State"): the SQLite saver rewrites every plain channel in
every checkpoint, so plain channels hold only small, bounded values (phase, the current
round's calls, invocation records). Everything that grows — agent memories, metrics — lives in
`DeltaChannel`s, which store each write once. The conversation history and the task are also
delta channels: written once at the start, never copied into later checkpoints.

All values are plain data (dicts, lists, str, numbers) so checkpoints deserialize strictly.
"""

from __future__ import annotations

import enum
import json
import uuid
from collections.abc import Sequence
from typing import Annotated, Any, TypedDict

from langgraph.channels.delta import DeltaChannel

from ..hooks.types import LEAD_INVOCATION as LEAD  # invocation id of the lead agent

CALL_SUBAGENT = "call_subagent"
# Snapshots copy a delta channel's whole value; we keep them rare because completed threads'
# checkpoints are deleted anyway and replay of a few hundred writes is cheap.
_SNAPSHOT_EVERY = 100_000


class ExecutionPhase(enum.StrEnum):
    """What runs next; every node sets it and `graph.route` reads nothing else.

    A pause for permission is not a phase: the tool node's `interrupt()` stops the run while
    the phase stays TOOL_EXECUTING, and the resume re-enters that node.
    """

    LEAD_EXECUTING = "lead_executing"  # the lead takes a step
    SUBAGENT_EXECUTING = "subagent_executing"  # running subagent invocations take a step
    TOOL_EXECUTING = "tool_executing"  # the tool node runs `pending_tool_calls`
    COMPLETED = "completed"  # the lead answered (or was stopped): the run ends


# --- reducers (deterministic and batching-invariant: they fold writes in order) ----------


def _replace(current: Any, writes: Sequence[Any]) -> Any:
    return writes[-1] if writes else current


def _memories(current: dict[str, list[Any]], writes: Sequence[dict[str, Any]]) -> dict[str, list[Any]]:
    """Writes are `{invocation_id: [messages]}` appends or `{invocation_id: None}` resets."""
    out = dict(current)
    for write in writes:
        for key, messages in write.items():
            if messages is None:
                out.pop(key, None)
            else:
                out[key] = [*out.get(key, ()), *messages]
    return out


def _pending_calls(current: list[dict[str, Any]] | None, write: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Concurrent subagent steps add calls; the tool node clears them with `None`."""
    if write is None:
        return []
    return [*(current or []), *write]


def _invocations(
    current: dict[str, dict[str, Any]] | None, write: dict[str, dict[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    """Subagent invocation records, merged by id; `None` clears them all."""
    if write is None:
        return {}
    out = dict(current or {})
    for key, record in write.items():
        out[key] = {**out.get(key, {}), **record}
    return out


class AgentState(TypedDict, total=False):
    current_task: Annotated[str, DeltaChannel(_replace, str, snapshot_frequency=_SNAPSHOT_EVERY)]
    conversation_history: Annotated[
        list[list[str]], DeltaChannel(_replace, list, snapshot_frequency=_SNAPSHOT_EVERY)
    ]
    phase: str
    current_agent: str
    # invocation id -> {agent, instruction, tool_call_id, status, rounds, result, error}
    subagent_pending: Annotated[dict[str, dict[str, Any]], _invocations]
    # this round's calls: {id, name, arguments, agent, invocation, needs_approval}
    pending_tool_calls: Annotated[list[dict[str, Any]], _pending_calls]
    # invocation id -> OpenAI-format messages (assistant turns and tool results)
    agent_memories: Annotated[
        dict[str, list[dict[str, Any]]],
        DeltaChannel(_memories, dict, snapshot_frequency=_SNAPSHOT_EVERY),
    ]
    graph_response: str | None
    outcome: str | None
    # Execution metrics are not kept in state: every LLM and tool call's usage and duration is
    # in its `llm_complete` / `tool_complete` event, and the controller aggregates them from the
    # event log (DESIGN: append-only records live in DeltaChannels or out of state).


def create_initial_state(
    task: str, *, conversation_history: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The graph input for a new message. The run's ids are not state: nodes read them from
    the runtime context (`RunContext`)."""
    # Stored as [role, content] pairs: LangGraph's DeltaChannel turns lists of role/content
    # dicts into LangChain message objects, which are not plain data.
    turns = [[m["role"], m["content"]] for m in conversation_history or []]
    return {
        "current_task": task,
        "conversation_history": turns,
        "phase": ExecutionPhase.LEAD_EXECUTING.value,
        "current_agent": "lead_agent",
        "subagent_pending": None,
        "pending_tool_calls": None,
        "agent_memories": {},
        "graph_response": None,
        "outcome": None,
    }


def without_nul(value: Any) -> Any:
    """Model text as state may hold it: NUL (U+0000) → U+FFFD. PostgreSQL's saver keeps string
    values in jsonb, which refuses NUL; the event log (JSON text) keeps the model's exact text."""
    return value.replace("\x00", "\ufffd") if isinstance(value, str) and "\x00" in value else value


def assistant_message(content: str, tool_calls: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant turn as memory keeps it and every later request resends it.

    `content` is `""`, never `null` (llama-cpp-python refuses null with HTTP 500), and
    arguments that are not a JSON object are stored as `{}`: strict servers (llama-server)
    refuse every later request whose history holds malformed arguments. The model still learns
    what was wrong from the tool's error, which quotes the arguments it sent.
    """
    message: dict[str, Any] = {"role": "assistant", "content": content or ""}
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": history_arguments(call["arguments"])},
            }
            for call in tool_calls
        ]
    return message


def history_arguments(raw: str | None) -> str:
    """Tool-call arguments safe to send back: `raw` if it is a JSON object, else `"{}"`."""
    if not raw:
        return "{}"
    try:
        value = json.loads(raw)
    except ValueError:
        return "{}"
    return raw if isinstance(value, dict) else "{}"


def merge_agent_response_to_state(
    *,
    agent: str,
    invocation: str,
    content: str,
    tool_calls: list[dict[str, Any]],
    needs_approval: dict[str, bool] | None = None,
    rounds_used: int = 0,
    max_tool_rounds: int | None = None,
) -> dict[str, Any]:
    """Agent response → partial state update with the next phase.

    Tool calls → TOOL_EXECUTING (every call of the response, in order). No call → COMPLETED
    for the lead; a subagent is marked done and the phase goes back to the lead
    (LEAD_EXECUTING), where its answer becomes the result of the lead's `call_subagent`. An
    agent that wants another round after `max_tool_rounds` is stopped with an explicit
    outcome rather than nudged (COMPLETED for the lead; a failed invocation for a subagent).
    """
    approvals = needs_approval or {}
    content = without_nul(content)
    tool_calls = [{**c, "arguments": without_nul(c["arguments"])} for c in tool_calls]
    update: dict[str, Any] = {
        "agent_memories": {invocation: [assistant_message(content, tool_calls)]},
    }
    is_lead = invocation == LEAD
    over_limit = bool(tool_calls) and max_tool_rounds is not None and rounds_used >= max_tool_rounds
    if over_limit:
        message = f"{agent} reached max_tool_rounds ({max_tool_rounds}) without a final answer"
        # The unanswered calls are dropped from memory so a later message's history stays valid.
        update["agent_memories"] = {invocation: [assistant_message(content, [])]}
        if is_lead:
            update.update(
                phase=ExecutionPhase.COMPLETED.value,
                graph_response=content or message,
                outcome="max_tool_rounds",
            )
        else:
            update["subagent_pending"] = {
                invocation: {"status": "failed", "error": message, "result": content}
            }
            update["phase"] = ExecutionPhase.LEAD_EXECUTING.value
        return update
    if tool_calls:
        update["pending_tool_calls"] = [
            {
                "id": call["id"],
                "name": call["name"],
                "arguments": call["arguments"],
                "agent": agent,
                "invocation": invocation,
                "needs_approval": bool(approvals.get(call["id"], False)),
                "round": rounds_used + 1,
            }
            for call in tool_calls
        ]
        update["phase"] = ExecutionPhase.TOOL_EXECUTING.value
        if not is_lead:
            update["subagent_pending"] = {invocation: {"rounds": rounds_used + 1, "status": "tools"}}
        return update
    if is_lead:
        update.update(
            phase=ExecutionPhase.COMPLETED.value, graph_response=content, outcome="completed"
        )
    else:
        update["subagent_pending"] = {invocation: {"status": "done", "result": content}}
        update["phase"] = ExecutionPhase.LEAD_EXECUTING.value
    return update


def rounds_used(memory: list[dict[str, Any]]) -> int:
    """Tool rounds an invocation has had: its assistant turns that called tools."""
    return sum(1 for m in memory if m.get("role") == "assistant" and m.get("tool_calls"))


def new_invocation_id(agent: str) -> str:
    return f"{agent}:{uuid.uuid4().hex[:8]}"
