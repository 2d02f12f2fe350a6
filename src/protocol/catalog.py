"""The graphs this server runs, as the protocol's assistants: the lead agent (its id, graph id
and name are the lead's name; LangGraph's template name `agent` is an alias of it) and every
valid workflow (`workflow:<name>`). An alias names the same assistant everywhere: lookups,
`assistants.search(graph_id=...)` and thread searches by `graph_id` metadata."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import NotFoundError

if TYPE_CHECKING:
    from ..client import Client

LEAD_ALIASES = ("agent",)  # LangGraph's template graph name: the lead agent


class Assistant:
    def __init__(
        self, assistant_id: str, graph_id: str, kind: str, name: str, description: str
    ) -> None:
        self.assistant_id, self.graph_id, self.kind = assistant_id, graph_id, kind
        self.name, self.description = name, description

    @property
    def names(self) -> set[str]:
        """Every name this assistant answers to."""
        aliases = LEAD_ALIASES if self.kind == "agent" else ()
        return {self.assistant_id, self.graph_id, self.name, *aliases}


def assistants(client: Client) -> list[Assistant]:
    lead = client.admin.services.lead
    out = [Assistant(lead.name, lead.name, "agent", lead.name, getattr(lead, "description", "") or "")]
    for workflow in client.workflows.list():
        if not workflow.get("problems"):
            name = f"workflow:{workflow['name']}"
            description = workflow.get("description") or ""
            out.append(Assistant(name, name, "workflow", workflow["name"], description))
    return out


def assistant(client: Client, assistant_id: str) -> Assistant:
    for found in assistants(client):
        if assistant_id in found.names:
            return found
    raise NotFoundError(f"assistant {assistant_id} not found; GET /assistants/search lists them")


def graph_ids(client: Client, name: str) -> set[str]:
    """The graph ids `name` stands for: the graph its assistant runs, and the name itself (a
    graph id written on a thread by another server keeps matching itself)."""
    try:
        found = assistant(client, name)
    except NotFoundError:
        return {name}
    return found.names
