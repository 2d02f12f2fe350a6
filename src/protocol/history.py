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

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError
from .body import Raw, encode
from .convert import interrupt_of
from .renderings import Rendering, renderings
from .steps import LEAD_NODE, TOOL_NODE, parse_step_id, step_id
from .thread_ids import shown
from .views import ROOT, checkpoint, iso, path_to

if TYPE_CHECKING:
    from ..client import Client

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class BranchValues:
    """A state's `values` before they are read: the messages after its step (`messages`,
    decoded: the one message whose states are built) or of whole messages before it (`part`,
    the JSON of their stored renderings, `renderings.Rendering.part`), behind the branch's
    messages before them. Built (`as_values`) only for the states a route returns, as the
    bytes of those parts joined (`body.Raw`): a 1,000-message branch's messages are not
    decoded, copied as dicts or encoded again to send one state."""

    before: BranchValues | None
    part: bytes = b""  # JSON list elements, comma-joined (b"": none)
    messages: list[JSON] | None = None

    def as_values(self) -> JSON:
        parts: list[bytes] = []
        node: BranchValues | None = self
        while node is not None:
            part = node.part if node.messages is None else encode(node.messages)[1:-1]
            if part:
                parts += (part, b",")
            node = node.before
        parts.reverse()
        chunks = parts[1:] if parts else parts  # no comma before the first
        return {"messages": Raw(b"[", *chunks, b"]")}


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


@dataclass(slots=True)
class _Slot:
    """One message of a thread, ready to build its states: its rendering, the branch's
    messages before it, and the id and step of the state before its first (its parent's
    last, or the root)."""

    message: JSON
    rendering: Rendering
    base: BranchValues | None
    parent_id: str
    parent_step: int
    states: list[JSON] | None = None

    def built(self, thread_id: str) -> list[JSON]:
        if self.states is None:
            parent = {  # what `_message_states` reads of the state before
                "checkpoint": checkpoint(thread_id, self.parent_id),
                "metadata": {"step": self.parent_step},
            }
            self.states, _ = _message_states(
                thread_id, self.message, self.rendering, self.base, parent
            )
        return self.states

    def after(self) -> tuple[BranchValues, str, int]:
        """What a following message's slot takes from this one (its base, parent, step)."""
        step = self.parent_step + self.rendering.count
        return BranchValues(self.base, self.rendering.part), self.message["id"], step


async def thread_states(
    client: Client, thread_id: str, messages: list[JSON]
) -> Callable[[], Iterator[JSON]]:
    """Every state of every branch of the thread, newest first (LangGraph lists a thread's
    checkpoints across its branches, and `useStream` builds its branch switcher from them),
    each built when the iteration reaches it (a page of 10 builds the states of the few
    messages it shows); `values` unbuilt (`materialised`). Ordered by (message creation,
    step), ties in the order of a walk of the tree, as a sort of every state was."""
    children: dict[str | None, list[JSON]] = {}
    for message in messages:
        children.setdefault(message["parent_id"], []).append(message)
    found = await renderings(client, messages)
    root = _root(thread_id)
    slots: list[_Slot] = []
    todo: list[tuple[str | None, BranchValues | None, str, int]] = [(None, None, ROOT, -1)]
    while todo:
        key, base, parent_id, parent_step = todo.pop()
        for message in children.get(key, []):
            slot = _Slot(message, found[message["id"]], base, parent_id, parent_step)
            slots.append(slot)
            todo.append((message["id"], *slot.after()))
    # -1: the root, as a message of no step but its own (-1), created at 0
    times = [0.0, *(slot.message["created_at"] for slot in slots)]
    counts = [0, *(slot.rendering.count for slot in slots)]
    by_time = sorted(range(len(times)), key=times.__getitem__, reverse=True)  # stable

    def state(index: int, i: int) -> JSON:
        return root if index == 0 else slots[index - 1].built(thread_id)[i]

    def newest_first() -> Iterator[JSON]:
        start = 0
        while start < len(by_time):
            end = start + 1
            while end < len(by_time) and times[by_time[end]] == times[by_time[start]]:
                end += 1
            group = by_time[start:end]
            if len(group) == 1:  # one message's states, newest first
                index = group[0]
                yield from (state(index, i) for i in range(max(counts[index], 1) - 1, -1, -1))
            else:  # messages created at once: by step, then in the walk's order
                steps = [(i if index else -1, index) for index in sorted(group)
                         for i in range(max(counts[index], 1))]
                steps.sort(key=lambda pair: pair[0], reverse=True)
                yield from (state(index, max(i, 0)) for i, index in steps)
            start = end

    return newest_first


def _message_states(
    thread_id: str, message: JSON, rendering: Rendering, base: BranchValues | None, parent: JSON
) -> tuple[list[JSON], BranchValues]:
    """The states of one message's steps after `parent` (the state its input follows), and
    the branch's messages after it."""
    steps = rendering.steps()
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
            "values": BranchValues(base, messages=messages),
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
    return states, BranchValues(base, rendering.part)


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


async def _branch(client: Client, thread_id: str, path: list[JSON]) -> list[_Slot]:
    """The messages of the branch root → `path[-1]`, ready to build their states."""
    found = await renderings(client, path)
    slots: list[_Slot] = []
    base: BranchValues | None = None
    parent_id, parent_step = ROOT, -1
    for message in path:
        slots.append(_Slot(message, found[message["id"]], base, parent_id, parent_step))
        base, parent_id, parent_step = slots[-1].after()
    return slots


async def states_to(
    client: Client, thread_id: str, messages: list[JSON], checkpoint_id: str | None
) -> Callable[[], Iterator[JSON]]:
    """The branch's states up to and including `checkpoint_id` (the thread's states up to a
    message, its step, or `root`), newest first, each built when the iteration reaches it;
    `values` unbuilt (`materialised`); 404 for an id not in the thread."""
    root = _root(thread_id)
    if checkpoint_id in (None, ROOT):
        return lambda: iter([root])
    slots = await _branch(client, thread_id, _path(thread_id, messages, checkpoint_id))
    last = slots[-1].built(thread_id)
    upto = next((i for i, state in enumerate(last) if _matches(state, checkpoint_id)), None)
    if upto is None:
        raise NotFoundError(f"checkpoint {checkpoint_id} not found in thread {shown(thread_id)}")

    def newest_first() -> Iterator[JSON]:
        yield from reversed(last[: upto + 1])
        for slot in reversed(slots[:-1]):
            yield from reversed(slot.built(thread_id))
        yield root

    return newest_first


async def state_at(
    client: Client, thread_id: str, messages: list[JSON], checkpoint_id: str | None
) -> JSON:
    """The state `checkpoint_id` names (a message, one of its steps, or `root`), values built
    (`body.Raw`), building only its message's states: the messages before it are counted and
    their stored JSON joined."""
    if checkpoint_id in (None, ROOT):
        return _root(thread_id)
    slots = await _branch(client, thread_id, _path(thread_id, messages, checkpoint_id))
    for state in slots[-1].built(thread_id):
        if _matches(state, checkpoint_id):
            return materialised([state])[0]
    raise NotFoundError(f"checkpoint {checkpoint_id} not found in thread {shown(thread_id)}")
