"""Assistants as the protocol sees them: the built-in ones (the config-file lead agent and the
workflows, read-only, shared by all) and the saved ones (`client/assistant_rows.py`, each its
creator's: another user's is a 404 and absent from lists), one lookup for both; and the agent
configuration a run gets from its assistant and its own `config` / `context`.

A saved assistant names a built-in graph (`graph_id`); its runs run that graph with its
configuration. A run's `config.configurable` and `context` override the assistant's key by key,
for that run only, with the same validation (`client/agent_config.AgentConfig`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from ..client import assistant_rows
from ..client.agent_config import AgentConfig, merged, run_services
from ..client.assistant_rows import AssistantRow
from ..errors import NotFoundError, UserError
from .views import iso

if TYPE_CHECKING:
    from ..client import Client


class Assistant(Protocol):
    """What a run needs of an assistant (`service.Assistant` for the built-in ones)."""

    assistant_id: str
    graph_id: str
    kind: str
    name: str
    description: str


class Assistants(Protocol):
    """The built-in assistants (`service.Protocol`: this module sits below it)."""

    client: Client

    def assistants(self) -> list[Any]: ...

    def assistant(self, assistant_id: str) -> Any: ...


class SavedAssistant:
    """A saved assistant: a built-in graph (its kind and name: a workflow's name is its file's)
    plus its configuration."""

    def __init__(self, row: AssistantRow, graph: Assistant) -> None:
        self.assistant_id, self.graph_id = row.assistant_id, row.graph_id
        self.kind, self.name, self.description = graph.kind, graph.name, row.description or ""
        self.row = row


def graph_of(p: Assistants, graph_id: str) -> Assistant:
    """The built-in graph `graph_id` names (a `UserError` listing the known ones if none)."""
    for builtin in p.assistants():
        if graph_id in (builtin.graph_id, builtin.assistant_id):
            return builtin
    if graph_id == "agent":
        return p.assistants()[0]
    known = ", ".join(a.graph_id for a in p.assistants())
    raise UserError(f"graph_id {graph_id!r} is not a graph of this server; known: {known}")


async def find(p: Assistants, assistant_id: str, *, user: str | None) -> Assistant:
    """A built-in assistant, or a saved one `user` may see (its owner's: another user's is
    as missing as none), by id; `NotFoundError` when neither."""
    try:
        return p.assistant(assistant_id)
    except NotFoundError:
        row = await assistant_rows.get(p.client.admin.store, assistant_id)
        if row is None or not row.visible_to(user):
            raise
        return SavedAssistant(row, graph_of(p, row.graph_id))


def run_config(p: Assistants, assistant: Assistant, body: dict[str, Any]) -> AgentConfig | None:
    """The agent configuration of a run of `assistant` asked by `body`: the assistant's, then
    the run's `config.configurable`, then its `context`; None when none is set. A `UserError`
    (422, nothing changed) when a key or value is wrong or names what the agent lacks."""
    config = body.get("config") or {}
    if not isinstance(config, dict):
        raise UserError("config must be an object")
    layers: list[Any] = [config.get("configurable"), body.get("context")]
    if isinstance(assistant, SavedAssistant):
        layers.insert(0, assistant.row.agent_config.set())
    result = merged(*layers, where="config.configurable")
    if not result.set():
        return None
    if assistant.kind == "workflow":
        raise UserError("a workflow assistant takes no agent configuration (model, tools, ...)")
    run_services(p.client.admin.services, result)  # tools, permissions, model: checked now
    return result


def check_saved(p: Assistants, graph: Assistant, config: dict[str, Any], context: dict[str, Any]) -> None:
    """An assistant's `config.configurable` and `context`, checked as a run would check them
    (keys, types, the lead's tools, known tools, the model's credentials)."""
    agent = merged((config or {}).get("configurable"), where="config.configurable")
    agent = merged(agent.set(), context, where="context")
    if agent.set() and graph.kind == "workflow":
        raise UserError("a workflow assistant takes no agent configuration (model, tools, ...)")
    run_services(p.client.admin.services, agent)


def builtin_view(a: Assistant) -> dict[str, Any]:
    return {
        "assistant_id": a.assistant_id,
        "graph_id": a.graph_id,
        "name": a.name,
        "description": a.description,
        "config": {},
        "context": {},
        "metadata": {"kind": a.kind, "built_in": True},
        "version": 1,
        "created_at": iso(0),
        "updated_at": iso(0),
    }


def saved_view(row: AssistantRow) -> dict[str, Any]:
    return {
        "assistant_id": row.assistant_id,
        "graph_id": row.graph_id,
        "name": row.name,
        "description": row.description,
        "config": row.config,
        "context": row.context,
        "metadata": row.metadata,
        "version": row.version,
        "created_at": iso(row.created_at),
        "updated_at": iso(row.updated_at),
    }


async def all_views(p: Assistants, user: str | None) -> list[dict[str, Any]]:
    """Built-in assistants first, then the saved ones `user` may see, newest first."""
    saved = await assistant_rows.search(p.client.admin.store, user)
    return [builtin_view(a) for a in p.assistants()] + [saved_view(r) for r in saved]
