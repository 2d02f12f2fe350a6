"""Agent groups: several agents share one conversation, and a rule picks who speaks next.

A workflow node of kind `group` names its members and a mode:

- `handoff`: the first member speaks; an agent passes the conversation on by calling the
  `handoff` tool (targets declared in its front matter, `handoffs: [...]`); an answer without a
  handoff ends the group.
- `order`: the members speak in the listed order (list an agent twice for a second round);
  a handoff jumps to its target, and the order continues after it.
- `moderator`: after each turn a moderator agent chooses the next speaker, or `finish`, as a
  JSON choice among those names, checked (one repair round, like any schema).

`max_turns` bounds the turns; reaching it ends the group with outcome `max_turns` (its output
says so) instead of looping forever. Every change of speaker emits a `handoff` event.

Like a single agent step this is a nested graph whose turns are the chat graph's subagent step
and whose tools go through the shared tool node, so a member's CONFIRM tool pauses the run and
resumes exactly once:

```
begin → speak ⇄ tool_execution        (a member's turn, its tool rounds)
speak → speak (next member) | moderate | END
moderate ⇄ tool_execution, moderate → speak | END
```
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Required, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime

from ..core.agent_nodes import subagent_step
from ..core.context import RunContext
from ..core.state import AgentUpdate, SubagentRecordUpdate
from ..core.tool_node import tool_execution
from ..events.envelope import Emitted
from ..events.payloads import HandoffData
from ..shapes import ChatMessage, PendingToolCall
from .schemas import check_output, choice_schema, schema_prompt
from .state import GroupTask, StepChannels, StepOutput, StepUpdate, memory_of, with_agent_channels

HANDOFF = "handoff"
FINISH = "finish"


class Turn(TypedDict):
    agent: str
    text: str


# the handoff that gave the current speaker the floor (`from` is a keyword: the functional form)
HandoffNote = TypedDict("HandoffNote", {"from": str, "message": str})


class GroupState(StepChannels, total=False):
    task: Required[GroupTask]
    # `begin` sets the first three before any other node reads them
    speaker: Required[str]
    turn: Required[int]
    position: Required[int]  # order mode: index in the member list of the current speaker
    transcript: list[Turn]
    note: HandoffNote | None  # the handoff that gave the current speaker the floor
    asking: str  # which node the tool node returns to


if not TYPE_CHECKING:
    GroupState = with_agent_channels(GroupState)


class GroupUpdate(StepUpdate, total=False):
    speaker: str
    turn: int
    position: int
    transcript: list[Turn]
    note: HandoffNote | None
    asking: str


def _inv(task: GroupTask, label: str) -> str:
    return f"{task['execution']}/{label}"


def _transcript_text(transcript: list[Turn]) -> str:
    if not transcript:
        return "(nobody has spoken yet)"
    return "\n\n".join(f"**{t['agent']}**: {t['text']}" for t in transcript)


def _turn_instruction(task: GroupTask, transcript: list[Turn], note: HandoffNote | None, speaker: str) -> str:
    parts = [task["instruction"], "## Conversation so far\n" + _transcript_text(transcript)]
    if note:
        parts.append(f"{note['from']} handed the conversation to you" + (f": {note['message']}" if note.get("message") else "."))
    targets = task["targets"].get(speaker) or []
    if targets:
        names = ", ".join(f"{t} ({task['descriptions'].get(t, '')})" for t in targets)
        parts.append(f"If another agent should take over, call the handoff tool with one of: {names}.")
    parts.append(f"You are {speaker}: take your turn.")
    return "\n\n".join(parts)


def _record(agent: str, instruction: str) -> SubagentRecordUpdate:
    return {"agent": agent, "instruction": instruction, "tool_call_id": None, "status": "running",
            "rounds": 0, "order": 0}


def _emit(runtime: Runtime[RunContext], task: GroupTask, *, from_agent: str, to_agent: str, message: str,
          by: str, turn: int) -> None:
    data = HandoffData(execution=task["execution"], node=task["node"], from_agent=from_agent, to_agent=to_agent,
                       message=message, by=by, turn=turn)
    runtime.stream_writer(Emitted(data, to_agent))


async def begin(state: GroupState, runtime: Runtime[RunContext]) -> GroupUpdate:
    task = state["task"]
    runtime.stream_writer(Emitted.load(task["start_event"]))
    await runtime.context.services.store.put_lineage(task["start_record"])
    speaker = task["agents"][0]
    return {"speaker": speaker, "turn": 1, "position": 0, "transcript": [], "note": None,
            "asking": "speak", "repairs": 0,
            "subagent_invocations": {_inv(task, "1"): _record(speaker, _turn_instruction(task, [], None, speaker))}}


def _finish(state: GroupState, outcome: str, answer: str, transcript: list[Turn]) -> GroupUpdate:
    output = {"answer": answer, "speaker": state["speaker"], "turns": state["turn"], "outcome": outcome,
              "transcript": transcript}
    return {"result": {"status": "ok", "output": output, "error": None, "outcome": outcome}}


def _next_turn(task: GroupTask, state: GroupState, speaker: str, position: int,
               transcript: list[Turn], note: HandoffNote | None) -> GroupUpdate:
    turn = state["turn"] + 1
    return {"speaker": speaker, "turn": turn, "position": position, "transcript": transcript, "note": note,
            "asking": "speak", "repairs": 0,
            "subagent_invocations": {_inv(task, str(turn)): _record(speaker, _turn_instruction(task, transcript, note, speaker))}}


async def _take_turn(state: GroupState, runtime: Runtime[RunContext], invocation: str) -> AgentUpdate:
    """One model call of `invocation` (a member's turn or the moderator's), through the chat
    graph's subagent step."""
    record = (state.get("subagent_invocations") or {})[invocation]
    if record["status"] == "failed":  # stopped in the tool node (the loop guard): no model call
        return {"subagent_invocations": {invocation: {"status": "failed", "error": record.get("error")}}}
    memory = list((state.get("agent_memories") or {}).get(invocation, []))
    update, _compacted = await subagent_step(runtime.context, runtime, invocation, record, memory, None, set())
    return update


async def speak(state: GroupState, runtime: Runtime[RunContext]) -> GroupUpdate:
    task = state["task"]
    invocation = _inv(task, str(state["turn"]))
    update = await _take_turn(state, runtime, invocation)
    speaker = state["speaker"]
    outcome = (update.get("subagent_invocations") or {}).get(invocation, {})
    if outcome.get("status") == "failed":
        return {**update, "result": {"status": "failed", "output": None,
                                     "error": f"{speaker} failed: {outcome.get('error')}"}}
    calls = update.get("pending_tool_calls") or []
    handoffs = [c for c in calls if c["name"] == HANDOFF]
    if handoffs:
        return _handoff(task, state, update, invocation, handoffs[0], runtime)
    if calls:
        return {**update}
    answer = outcome.get("result") or ""
    transcript: list[Turn] = [*(state.get("transcript") or []), {"agent": speaker, "text": answer}]
    if task["mode"] == "handoff":
        return {**update, **_finish(state, "completed", answer, transcript)}
    if task["mode"] == "order":
        position = state["position"] + 1
        if position >= len(task["agents"]):
            return {**update, **_finish(state, "completed", answer, transcript)}
        if state["turn"] >= task["max_turns"]:
            return {**update, **_finish(state, "max_turns", answer, transcript)}
        nxt = task["agents"][position]
        return {**update, **_next_turn(task, state, nxt, position, transcript, None)}
    # moderator mode: the moderator picks
    moderator = task["moderator"] or ""  # validated: a moderator group names its moderator
    return {**update, "transcript": transcript, "asking": "moderate", "repairs": 0,
            "subagent_invocations": {**(update.get("subagent_invocations") or {}), _inv(task, f"mod{state['turn']}"):
                                     _record(moderator, _moderator_instruction(task, transcript))}}


def _handoff(task: GroupTask, state: GroupState, update: AgentUpdate, invocation: str,
             call: PendingToolCall, runtime: Runtime[RunContext]) -> GroupUpdate:
    speaker = state["speaker"]
    try:
        args = json.loads(call["arguments"] or "{}")
    except json.JSONDecodeError:
        args = {}
    target = args.get("agent") if isinstance(args, dict) else None
    allowed = task["targets"].get(speaker) or []
    if not isinstance(target, str) or target not in allowed:
        # a refusal the agent can act on; its other calls (if any) still go to the tool node
        text = (f"ERROR: cannot hand over to {target!r}; you may hand over to: "
                f"{', '.join(allowed) or 'nobody (answer yourself)'}")
        rest = [c for c in update.get("pending_tool_calls") or [] if c["id"] != call["id"]]
        refusal: ChatMessage = {"role": "tool", "tool_call_id": call["id"], "content": text}
        out: GroupUpdate = {**update, "agent_memories": {invocation: [*memory_of(update, invocation), refusal]},
                            "pending_tool_calls": rest}
        if not rest:
            out["subagent_invocations"] = {invocation: {"status": "running"}}
        return out
    assert isinstance(args, dict)  # a valid target came from a JSON object
    message = str(args.get("message") or "")
    content = str(memory_of(update, invocation)[0].get("content") or "").strip()
    text = (content + "\n" if content else "") + f"(hands over to {target}" + (f": {message})" if message else ")")
    transcript: list[Turn] = [*(state.get("transcript") or []), {"agent": speaker, "text": text}]
    _emit(runtime, task, from_agent=speaker, to_agent=target, message=message, by="handoff",
          turn=state["turn"])
    base: GroupUpdate = {**update, "pending_tool_calls": None, "subagent_invocations": {invocation: {"status": "done"}}}
    if state["turn"] >= task["max_turns"]:
        return {**base, **_finish(state, "max_turns", content, transcript)}
    position = state["position"]
    if task["mode"] == "order" and target in task["agents"]:
        position = task["agents"].index(target)
    return {**base, **_next_turn(task, state, target, position, transcript, {"from": speaker, "message": message})}


def _moderator_instruction(task: GroupTask, transcript: list[Turn]) -> str:
    members = ", ".join(f"{a} ({task['descriptions'].get(a, '')})" for a in dict.fromkeys(task["agents"]))
    return (f"{task['instruction']}\n\n## Conversation so far\n{_transcript_text(transcript)}\n\n"
            f"You moderate this conversation between: {members}. Choose who speaks next, or "
            f"'{FINISH}' when the task is done." + schema_prompt({}, _choices(task)))


def _choices(task: GroupTask) -> list[str]:
    return [*dict.fromkeys(task["agents"]), FINISH]


async def moderate(state: GroupState, runtime: Runtime[RunContext]) -> GroupUpdate:
    task = state["task"]
    invocation = _inv(task, f"mod{state['turn']}")
    update = await _take_turn(state, runtime, invocation)
    outcome = (update.get("subagent_invocations") or {}).get(invocation, {})
    if outcome.get("status") == "failed":
        return {**update, "result": {"status": "failed", "output": None,
                                     "error": f"moderator {task['moderator']} failed: {outcome.get('error')}"}}
    if update.get("pending_tool_calls"):
        return {**update}
    choice, found = check_output(choice_schema(_choices(task)), outcome.get("result") or "")
    transcript = state.get("transcript") or []
    last = transcript[-1]["text"] if transcript else ""
    if found:
        if int(state.get("repairs") or 0) < 1:
            note: ChatMessage = {"role": "user", "content": "Your answer could not be used: " + "; ".join(found)
                                 + ". Answer again, with only the JSON object asked for."}
            return {**update, "repairs": 1, "subagent_invocations": {invocation: {"status": "running"}},
                    "agent_memories": {invocation: [*memory_of(update, invocation), note]}}
        return {**update, "result": {"status": "failed", "output": None,
                                     "error": "the moderator's choice was unusable after one repair round: " + "; ".join(found)}}
    nxt = choice["choice"]
    if nxt == FINISH:
        return {**update, **_finish(state, "completed", last, transcript)}
    if state["turn"] >= task["max_turns"]:
        return {**update, **_finish(state, "max_turns", last, transcript)}
    _emit(runtime, task, from_agent=state["speaker"], to_agent=nxt, message=choice.get("reason") or "",
          by="moderator", turn=state["turn"])
    return {**update, **_next_turn(task, state, nxt, state["position"], transcript, None)}


def _after(state: Mapping[str, Any]) -> str:
    # Annotated as a Mapping, not `GroupState`: a class here would make LangGraph read the
    # router's input by that schema instead of passing the node's own writes through.
    if state.get("result") is not None:
        return END
    if state.get("pending_tool_calls"):
        return "tool_execution"
    return state.get("asking") or "speak"


def step_graph_builder(state_schema: type, **nodes: Any) -> Any:
    """A step's nested graph (one agent's, or a group's) with `nodes`, entered at `begin`:
    it runs in the run's context and returns a `StepOutput`."""
    builder = StateGraph(state_schema, context_schema=RunContext, output_schema=StepOutput)
    for name, node in nodes.items():
        builder.add_node(name, node)
    builder.add_edge(START, "begin")
    return builder


def build_group_graph() -> Any:
    builder = step_graph_builder(
        GroupState, begin=begin, speak=speak, moderate=moderate, tool_execution=tool_execution
    )
    builder.add_edge("begin", "speak")
    for node in ("speak", "moderate", "tool_execution"):
        builder.add_conditional_edges(node, _after, ["speak", "moderate", "tool_execution", END])
    return builder.compile()


GROUP_GRAPH = build_group_graph()
