"""Recall before the model call: the engine's side of `memory.recall`.

The engine knows nothing of memory (layers: `memory` sits above `core`). The facade hands it a
`Recaller` on `Services.recaller`; before an agent invocation's first model call of a message
the agent node asks it for a section (`Recalled`) and appends that section, delimited by its
tags, to the request's system message. One system message, not a second one: chat templates
of local models (llama.cpp, Ollama) often accept a system message only at the start.

Exactly once. LangGraph re-runs a node from its first line on resume, and a recovered run
re-runs the node its process died in; an agent's later rounds must see the same section as
its first. So the section is keyed like the hook marks (`af_hook_marks`, key
`memory_recall/{invocation}`): the first firing stores it (JSON) before it emits
`memory_recalled` and fires `on_memory_recall`; every later call for the invocation (a later
round, a resumed or recovered segment, another process) reads it back and fires nothing. A
process that dies between the store and the event loses the event, never doubles it.

State stays lean: the section is not copied into the checkpointed state; it is added to the
request of each round (one cached read per segment).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..events.payloads import AgentEventData, MemoryRecalledData
from ..hooks import nodes as hook_points
from ..hooks.types import AgentStep, MemoryRecall
from ..shapes import ChatMessage

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..agents.spec import AgentSpec
    from .store.repository import AppStore

KEY_PREFIX = "memory_recall/"


@dataclass(frozen=True)
class RecallRequest:
    """What a `Recaller` is asked: whose memories (user, project, conversation), for which
    agent invocation, about what (`query`: the task or instruction), with which profile
    (None: the recaller's default; a workflow node or the agent's spec may name one)."""

    user_id: str | None
    project: str | None
    conversation_id: str
    message_id: str
    agent: str
    invocation: str
    query: str
    profile: str | None = None
    lead: bool = True
    asked: bool = False  # the agent's spec (`recall: true`) or a workflow node asked for it


@dataclass
class Recalled:
    """The section to inject (`text`) and what it holds, as `memory_recalled` reports it."""

    text: str
    ids: list[str]
    profile: str
    mode: str
    tokens: int
    budget: int | None = None
    namespaces: list[list[str]] = field(default_factory=list)
    knowledge_ids: list[str] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Recalled:
        return cls(**json.loads(text))

    def event(self) -> MemoryRecalledData:
        return MemoryRecalledData(
            ids=self.ids, profile=self.profile, mode=self.mode, tokens=self.tokens,
            budget=self.budget, namespaces=self.namespaces, knowledge_ids=self.knowledge_ids,
            items=self.items,
        )

    def hook_record(self) -> MemoryRecall:
        return MemoryRecall(
            ids=list(self.ids), profile=self.profile, mode=self.mode, tokens=self.tokens,
            budget=self.budget, text=self.text, namespaces=[list(n) for n in self.namespaces],
        )


class Recaller(Protocol):
    """What the engine needs of memory (`memory/recall.py` implements it)."""

    def wants(self, spec: AgentSpec, *, lead: bool, profile: str | None = None) -> bool:
        """Whether `spec`'s invocations recall at all (the lead: `memory.recall`; a subagent:
        only when its spec asks; `profile`: a workflow node's override)."""
        ...

    async def recall(self, request: RecallRequest) -> Recalled | None:
        """The section for `request`, or None when nothing was found."""
        ...


class _RecallServices(Protocol):
    """What recall reads of the process's services (`context.Services`)."""

    @property
    def recaller(self) -> Recaller | None: ...

    @property
    def store(self) -> AppStore: ...


class RecallContext(Protocol):
    """What recall reads of a run's context: `context.RunContext` has it. Typed here, since
    `context.py` imports this module (its `Services` holds a `Recaller`)."""

    @property
    def services(self) -> _RecallServices: ...

    @property
    def conversation_id(self) -> str: ...

    @property
    def message_id(self) -> str: ...

    @property
    def fresh(self) -> bool: ...

    @property
    def window(self) -> dict[str, Any]: ...


async def with_recall(
    fixed: list[ChatMessage],
    context: RecallContext,
    spec: AgentSpec,
    invocation: str,
    query: str,
    *,
    first: bool,
    emit: Callable[[AgentEventData], None],
    agent: AgentStep | None,
    lead: bool,
    profile: str | None = None,
) -> list[ChatMessage]:
    """`fixed` (the agent's system message first) with the invocation's recalled section
    appended to its system message; `fixed` itself when recall is off or found nothing.
    `first`: this is the invocation's first model call of the message, the only one that may
    run the search."""
    svc = context.services
    recaller: Recaller | None = svc.recaller
    if recaller is None or not recaller.wants(spec, lead=lead, profile=profile):
        return fixed
    cache: dict[str, Recalled | None] = context.window.setdefault("recall", {})
    if invocation not in cache:
        ask = _Ask(spec, invocation, query, first, emit, agent, lead, profile)
        cache[invocation] = await _once(context, recaller, ask)
    found = cache[invocation]
    if not found or not found.text:
        return fixed
    if fixed and fixed[0]["role"] == "system":
        system: ChatMessage = {**fixed[0], "content": f"{fixed[0].get('content') or ''}\n\n{found.text}"}
        return [system, *fixed[1:]]
    return [{"role": "system", "content": found.text}, *fixed]


@dataclass(frozen=True)
class _Ask:
    """One invocation's recall, as `with_recall` was called for it."""

    spec: AgentSpec
    invocation: str
    query: str
    first: bool
    emit: Callable[[AgentEventData], None]
    agent: AgentStep | None
    lead: bool
    profile: str | None


async def _once(context: RecallContext, recaller: Recaller, ask: _Ask) -> Recalled | None:
    spec, invocation, profile = ask.spec, ask.invocation, ask.profile
    store = context.services.store
    key = KEY_PREFIX + invocation
    if not context.fresh:  # a new segment cannot have stored anything yet
        stored = await store.hook_mark_get(context.message_id, key)
        if stored is not None:
            return _decode(stored)
    if not ask.first:  # recall runs before the first model call only
        return None
    conversation = await store.get_conversation(context.conversation_id)
    request = RecallRequest(
        user_id=(conversation or {}).get("user_id"),
        project=(conversation or {}).get("project"),
        conversation_id=context.conversation_id,
        message_id=context.message_id,
        agent=spec.name,
        invocation=invocation,
        query=ask.query,
        profile=profile or spec.memory_profile,
        lead=ask.lead,
        asked=bool(profile) or spec.recall is True,
    )
    found = await recaller.recall(request)
    value = "null" if found is None else found.to_json()
    if not await store.hook_mark_put(context.message_id, key, value):
        # another run of this node stored it first (a recovery raced us): use that one
        stored = await store.hook_mark_get(context.message_id, key)
        return _decode(stored) if stored is not None else found
    if found is not None:
        ask.emit(found.event())
        await hook_points.memory_recalled(context, ask.agent, found.hook_record())
    return found


def _decode(stored: str) -> Recalled | None:
    return None if stored == "null" else Recalled.from_json(stored)
