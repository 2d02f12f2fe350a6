"""The graph state and the one function that turns an agent response into a state update.

Storage discipline (see DESIGN "State"): the SQLite saver rewrites every plain channel in
every checkpoint, so plain channels hold only small, bounded values (phase, the current
round's calls, invocation records). Everything that grows — agent memories, metrics — lives in
`DeltaChannel`s, which store each write once. The conversation history and the task are also
delta channels: written once at the start, never copied into later checkpoints.

All values are plain data (dicts, lists, str, numbers) so checkpoints deserialize strictly.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal, NotRequired, TypedDict, cast

from langgraph.channels.delta import DeltaChannel

from ..events.status import ExecutionPhase, Outcome, SubagentStatus
from ..hooks.types import LEAD_INVOCATION as LEAD  # invocation id of the lead agent
from ..shapes import ChatMessage, PendingToolCall, RawToolCall
from ..tools.arguments import canonical_arguments

CALL_SUBAGENT = "call_subagent"
# Snapshots copy a delta channel's whole value; we keep them rare because completed threads'
# checkpoints are deleted anyway and replay of a few hundred writes is cheap.
_SNAPSHOT_EVERY = 100_000


# State holds the values of these enums as plain strings (see `status`): members compare
# equal to them, and `ExecutionPhase.COMPLETED.value` has the literal type below.
PhaseValue = Literal["lead_executing", "subagent_executing", "tool_executing", "completed"]
OutcomeValue = Literal["completed", "max_tool_rounds", "budget_exceeded", "loop_detected"]
SubagentStatusValue = Literal["running", "tools", "done", "failed"]
assert {*PhaseValue.__args__} == {*ExecutionPhase}  # noqa: S101 - one definition: the enums
assert {*OutcomeValue.__args__} == {*Outcome}  # noqa: S101
assert {*SubagentStatusValue.__args__} == {*SubagentStatus}  # noqa: S101


class SubagentRecord(TypedDict):
    """One subagent invocation of the lead's current round (or of a workflow step)."""

    agent: str
    instruction: str
    tool_call_id: str | None  # the lead's `call_subagent` call (None in a workflow step)
    status: SubagentStatusValue
    rounds: int  # tool rounds taken so far
    order: int  # position among the round's `call_subagent` calls
    result: NotRequired[str | None]  # the answer (or a partial one, when failed)
    error: NotRequired[str | None]
    outcome: NotRequired[OutcomeValue]  # why a workflow step's agent was stopped (loop guard)
    memory_profile: NotRequired[str | None]  # a workflow node's context profile (recall)


class SubagentRecordUpdate(TypedDict, total=False):
    """A write to a `SubagentRecord`: the reducer merges it key by key."""

    agent: str
    instruction: str
    tool_call_id: str | None
    status: SubagentStatusValue
    rounds: int
    order: int
    result: str | None
    error: str | None
    outcome: OutcomeValue
    memory_profile: str | None


Memories = dict[str, list[ChatMessage]]  # invocation id -> its working memory


# --- reducers (deterministic and batching-invariant: they fold writes in order) ----------


def _replace(current: Any, writes: Sequence[Any]) -> Any:
    return writes[-1] if writes else current


def _memories(current: Memories, writes: Sequence[Mapping[str, list[ChatMessage] | None]]) -> Memories:
    """Writes are `{invocation_id: [messages]}` appends or `{invocation_id: None}` resets."""
    out = dict(current)
    for write in writes:
        for key, messages in write.items():
            if messages is None:
                out.pop(key, None)
            else:
                out[key] = [*out.get(key, ()), *messages]
    return out


def _pending_calls(
    current: list[PendingToolCall] | None, write: list[PendingToolCall] | None
) -> list[PendingToolCall]:
    """Concurrent subagent steps add calls; the tool node clears them with `None`."""
    if write is None:
        return []
    return [*(current or []), *write]


def _invocations(
    current: dict[str, SubagentRecord] | None, write: dict[str, SubagentRecordUpdate] | None
) -> dict[str, SubagentRecord]:
    """Subagent invocation records, merged by id; `None` clears them all."""
    if write is None:
        return {}
    out = dict(current or {})
    for key, record in write.items():
        out[key] = cast(SubagentRecord, {**out.get(key, {}), **record})  # creation sets every key
    return out


class AgentState(TypedDict, total=False):
    current_task: Annotated[str, DeltaChannel(_replace, str, snapshot_frequency=_SNAPSHOT_EVERY)]
    conversation_history: Annotated[
        list[list[str]], DeltaChannel(_replace, list, snapshot_frequency=_SNAPSHOT_EVERY)
    ]
    phase: PhaseValue
    # the agents taking the current step: the lead, or the subagents running in parallel
    active_agents: list[str]
    # invocation id -> record: the subagents the lead started this round, running or answered;
    # cleared when the lead closes the round
    subagent_invocations: Annotated[dict[str, SubagentRecord], _invocations]
    pending_tool_calls: Annotated[list[PendingToolCall], _pending_calls]  # this round's calls
    # invocation id -> OpenAI-format messages (assistant turns and tool results)
    agent_memories: Annotated[Memories, DeltaChannel(_memories, dict, snapshot_frequency=_SNAPSHOT_EVERY)]
    # invocation id -> its tool results (and hooks' notes) of a round that also started
    # subagents: held until they answer, then put in call order with their answers
    # (`close_lead_round`; only the lead starts subagents). Same writes as `agent_memories`.
    held_tool_results: Annotated[Memories, DeltaChannel(_memories, dict, snapshot_frequency=_SNAPSHOT_EVERY)]
    graph_response: str | None
    outcome: OutcomeValue | None
    outcome_reason: str | None  # why a run stopped early (the loop guard's finding)
    # Execution metrics are not kept in state: every LLM and tool call's usage and duration is
    # in its `llm_complete` / `tool_complete` event, and the controller aggregates them from the
    # event log (DESIGN: append-only records live in DeltaChannels or out of state).


class AgentUpdate(TypedDict, total=False):
    """What a node writes: the reducers' inputs. `None` clears a reducer channel; a memory
    write `{invocation: None}` resets that memory (then appends follow)."""

    current_task: str
    conversation_history: list[list[str]]
    phase: PhaseValue
    active_agents: list[str]
    subagent_invocations: dict[str, SubagentRecordUpdate] | None
    pending_tool_calls: list[PendingToolCall] | None
    agent_memories: Mapping[str, list[ChatMessage] | None]
    held_tool_results: Mapping[str, list[ChatMessage] | None]
    graph_response: str | None
    outcome: OutcomeValue | None
    outcome_reason: str | None


def create_initial_state(
    task: str, *, conversation_history: list[ChatMessage] | None = None
) -> AgentUpdate:
    """The graph input for a new message. The run's ids are not state: nodes read them from
    the runtime context (`RunContext`)."""
    # Stored as [role, content] pairs: LangGraph's DeltaChannel turns lists of role/content
    # dicts into LangChain message objects, which are not plain data.
    turns = [[m["role"], str(m.get("content") or "")] for m in conversation_history or []]
    return {
        "current_task": task,
        "conversation_history": turns,
        "phase": ExecutionPhase.LEAD_EXECUTING.value,
        "active_agents": [],
        "subagent_invocations": None,
        "pending_tool_calls": None,
        "agent_memories": {},
        "graph_response": None,
        "outcome": None,
    }


def without_nul(value: Any) -> Any:
    """Model text as state may hold it: NUL (U+0000) → U+FFFD. PostgreSQL's saver keeps string
    values in jsonb, which refuses NUL; the event log (JSON text) keeps the model's exact text."""
    return value.replace("\x00", "\ufffd") if isinstance(value, str) and "\x00" in value else value


def assistant_message(content: str, tool_calls: Sequence[RawToolCall]) -> ChatMessage:
    """The assistant turn as memory keeps it and every later request resends it.

    `content` is `""`, never `null` (llama-cpp-python refuses null with HTTP 500), and
    arguments that are not a JSON object are stored as `{}`: strict servers (llama-server)
    refuse every later request whose history holds malformed arguments. The model still learns
    what was wrong from the tool's error, which quotes the arguments it sent.
    """
    message: ChatMessage = {"role": "assistant", "content": content or ""}
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
    """Tool-call arguments safe to send back: `raw` if it is a JSON object, its leniently
    parsed object re-serialized (a raw newline in a string, a code fence), else `"{}"`."""
    return canonical_arguments(raw) or "{}"


def merge_agent_response_to_state(
    *,
    agent: str,
    invocation: str,
    content: str,
    tool_calls: Sequence[RawToolCall],
    needs_approval: dict[str, bool] | None = None,
    rounds_used: int = 0,
    max_tool_rounds: int | None = None,
) -> AgentUpdate:
    """Agent response → partial state update with the next phase.

    Tool calls → TOOL_EXECUTING (every call of the response, in order). No call → COMPLETED
    for the lead; a subagent is marked done and the phase goes back to the lead
    (LEAD_EXECUTING), where its answer becomes the result of the lead's `call_subagent`. An
    agent that wants another round after `max_tool_rounds` is stopped with an explicit
    outcome rather than nudged (COMPLETED for the lead; a failed invocation for a subagent).
    """
    approvals = needs_approval or {}
    content = without_nul(content)
    tool_calls = [RawToolCall(id=c["id"], name=c["name"], arguments=without_nul(c["arguments"])) for c in tool_calls]
    update: AgentUpdate = {
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
                outcome=Outcome.MAX_TOOL_ROUNDS.value,
            )
        else:
            update["subagent_invocations"] = {
                invocation: {"status": SubagentStatus.FAILED.value, "error": message, "result": content}
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
            update["subagent_invocations"] = {
                invocation: {"rounds": rounds_used + 1, "status": SubagentStatus.TOOLS.value}
            }
        return update
    if is_lead:
        update.update(
            phase=ExecutionPhase.COMPLETED.value, graph_response=content, outcome=Outcome.COMPLETED.value
        )
    else:
        update["subagent_invocations"] = {invocation: {"status": SubagentStatus.DONE.value, "result": content}}
        update["phase"] = ExecutionPhase.LEAD_EXECUTING.value
    return update


def rounds_used(memory: Sequence[ChatMessage]) -> int:
    """Tool rounds an invocation has had: its assistant turns that called tools."""
    return sum(1 for m in memory if m.get("role") == "assistant" and m.get("tool_calls"))


def new_invocation_id(agent: str) -> str:
    return f"{agent}:{uuid.uuid4().hex[:8]}"
