"""A thread's states at super-step granularity (`steps.py`), as `threads.get_state`,
`get_history` and the runs' forks see them.

The states of a branch are: `root` (before the first message), then for each message on the
path from the root to the checkpoint asked for, one state per step: after its input (`M:0`),
after each model turn and each tool round (`M:k`), the last one with the message's own id `M`
(`M:<last>` names it too). Each has `parent_checkpoint` (the state before it on the branch),
`next` (the node that runs next), `tasks` (with the interrupt when paused there) and
`metadata.step` (counted along the branch from -1 at the root), `source` ("input" for a
message's input, "loop" after a node) and `writes` (`{node: {"messages": [...]}}`).

Another branch is reached by naming one of its checkpoints (`checkpoint` of `get_history`,
`get_state(checkpoint_id=...)`): every message a thread ever had keeps its states.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError
from .convert import interrupt_of
from .steps import LEAD_NODE, TOOL_NODE, parse_step_id, step_id
from .steps_cache import Steps, steps_by_message
from .thread_ids import shown
from .views import ROOT, checkpoint, iso, path_to

if TYPE_CHECKING:
    from ..client import Client

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class BranchValues:
    """A state's `values` before they are read: the message's messages after the step, behind
    the branch's messages before it (shared by every state after them). A branch of n messages
    has ~4n states, and each state's own copy of the branch's messages made a 1,000-message
    thread's head cost 4,000 list copies of ~2,000 items, to return one of them
    (`materialised` builds only the states a route returns)."""

    before: BranchValues | None
    messages: list[JSON]

    def as_values(self) -> JSON:
        chunks: list[list[JSON]] = []
        node: BranchValues | None = self
        while node is not None:
            chunks.append(node.messages)
            node = node.before
        out: list[JSON] = []
        for chunk in reversed(chunks):
            out += chunk
        return {"messages": out}


def materialised(states: list[JSON]) -> list[JSON]:
    """`states` with their `values` built (history.py's states keep them as `BranchValues`
    until a route picks the ones it returns)."""
    for state in states:
        if isinstance(state["values"], BranchValues):
            state["values"] = state["values"].as_values()
    return states


def _task(task_id: str, name: str, interrupts: list[JSON]) -> JSON:
    return {
        "id": task_id,
        "name": name,
        "path": [],
        "error": None,
        "interrupts": interrupts,
        "checkpoint": None,
        "state": None,
        "result": None,
    }


def _root(thread_id: str) -> JSON:
    return {
        "values": {},
        "next": [],
        "tasks": [],
        "checkpoint": checkpoint(thread_id, ROOT),
        "parent_checkpoint": None,
        "metadata": {"source": "input", "step": -1, "writes": None, "parents": {}},
        "created_at": None,
        "interrupts": [],
    }


async def branch_states(client: Client, thread_id: str, path: list[JSON]) -> list[JSON]:
    """Every state of the branch root → `path[-1]`, oldest first."""
    states = [_root(thread_id)]
    base: BranchValues | None = None
    steps = await steps_by_message(client, path)
    for message in path:
        mine, base = _message_states(thread_id, message, steps[message["id"]], base, states[-1])
        states += mine
    return states


async def thread_states(client: Client, thread_id: str, messages: list[JSON]) -> list[JSON]:
    """Every state of every branch of the thread, newest first (LangGraph lists a thread's
    checkpoints across its branches, and `useStream` builds its branch switcher from them);
    `values` unbuilt (`materialised`)."""
    children: dict[str | None, list[JSON]] = {}
    for message in messages:
        children.setdefault(message["parent_id"], []).append(message)
    root = _root(thread_id)
    found: list[tuple[tuple[float, int], JSON]] = [((0.0, -1), root)]
    todo: list[tuple[str | None, BranchValues | None, JSON]] = [(None, None, root)]
    steps = await steps_by_message(client, messages)
    while todo:
        parent_id, base, parent_state = todo.pop()
        for message in children.get(parent_id, []):
            mine, after = _message_states(thread_id, message, steps[message["id"]], base, parent_state)
            found += [((message["created_at"], i), state) for i, state in enumerate(mine)]
            todo.append((message["id"], after, mine[-1]))
    found.sort(key=lambda pair: pair[0], reverse=True)
    return [state for _, state in found]


def _message_states(
    thread_id: str, message: JSON, steps: Steps, base: BranchValues | None, parent: JSON
) -> tuple[list[JSON], BranchValues]:
    """The states of one message's `steps` after `parent` (the state its input follows), and
    the branch's messages after it."""
    states: list[JSON] = []
    previous = parent
    for index, (step, node, writes, messages) in enumerate(steps):
        last = index == len(steps) - 1
        interrupts: list[JSON] = []
        tasks: list[JSON] = []
        if not last:
            following = steps[index + 1][1] or LEAD_NODE
            tasks = [_task(step_id(message["id"], step + 1), following, [])]
        elif message["status"] == "waiting" and message.get("waiting_for"):
            interrupts = [interrupt_of(message["waiting_for"])]
            tasks = [_task(message["id"], TOOL_NODE, interrupts)]
        elif message["status"] == "running":
            upcoming = TOOL_NODE if node == LEAD_NODE and _calls(writes) else LEAD_NODE
            tasks = [_task(message["id"], upcoming, [])]
        state = {
            "values": BranchValues(base, messages),
            "next": [t["name"] for t in tasks],
            "tasks": tasks,
            "checkpoint": checkpoint(
                thread_id, message["id"] if last else step_id(message["id"], step)
            ),
            "parent_checkpoint": previous["checkpoint"],
            "metadata": {
                "source": "input" if node is None else "loop",
                "step": previous["metadata"]["step"] + 1,
                "writes": {node or "__start__": {"messages": writes}},
                "parents": {},
                "message_id": message["id"],
                "step_in_turn": step,
                "status": message["status"] if last else "running",
            },
            "created_at": iso(message["created_at"] if step == 0 else message["updated_at"]),
            "interrupts": interrupts,
        }
        states.append(state)
        previous = state
    return states, BranchValues(base, steps[-1][3])


def _calls(writes: list[JSON]) -> bool:
    return any(m.get("tool_calls") for m in writes)


def _matches(state: JSON, checkpoint_id: str) -> bool:
    """`checkpoint_id` names this state: its id, or `M:k` for the message's last step `M`."""
    own = state["checkpoint"]["checkpoint_id"]
    message_id, step = parse_step_id(checkpoint_id)
    return own == checkpoint_id or (
        step is not None and own == message_id and state["metadata"]["step_in_turn"] == step
    )


def _path(thread_id: str, messages: list[JSON], checkpoint_id: str) -> list[JSON]:
    """The messages root → the one `checkpoint_id` names; 404 for an id not in the thread."""
    by_id = {m["id"]: m for m in messages}
    message_id, _ = parse_step_id(checkpoint_id)
    if message_id not in by_id:
        raise NotFoundError(f"checkpoint {checkpoint_id} not found in thread {shown(thread_id)}")
    return path_to(by_id, message_id)


async def states_to(
    client: Client, thread_id: str, messages: list[JSON], checkpoint_id: str | None
) -> list[JSON]:
    """The branch's states up to and including `checkpoint_id` (the thread's states up to a
    message, its step, or `root`), oldest first, the last one's `values` built (the others'
    with `materialised`); 404 for an id not in the thread."""
    if checkpoint_id in (None, ROOT):
        return [_root(thread_id)]
    states = await branch_states(client, thread_id, _path(thread_id, messages, checkpoint_id))
    for index, state in enumerate(states):
        if _matches(state, checkpoint_id):
            materialised([state])
            return states[: index + 1]
    raise NotFoundError(f"checkpoint {checkpoint_id} not found in thread {shown(thread_id)}")


async def state_at(
    client: Client, thread_id: str, messages: list[JSON], checkpoint_id: str | None
) -> JSON:
    """`states_to(...)[-1]`, values built, without building the states of the messages before
    the one it names: their steps are only counted (a thread's head on a 1,000-message branch
    built ~4,000 states to return one)."""
    if checkpoint_id in (None, ROOT):
        return _root(thread_id)
    path = _path(thread_id, messages, checkpoint_id)
    steps = await steps_by_message(client, path)
    base: BranchValues | None = None
    step = -1  # the root's
    for message in path[:-1]:
        own = steps[message["id"]]
        base, step = BranchValues(base, own[-1][3]), step + len(own)
    previous = _root(thread_id)
    if len(path) > 1:  # what `_message_states` reads of the state before: its id and step
        previous = {"checkpoint": checkpoint(thread_id, path[-2]["id"]), "metadata": {"step": step}}
    mine, _ = _message_states(thread_id, path[-1], steps[path[-1]["id"]], base, previous)
    for state in mine:
        if _matches(state, checkpoint_id):
            return materialised([state])[0]
    raise NotFoundError(f"checkpoint {checkpoint_id} not found in thread {shown(thread_id)}")
