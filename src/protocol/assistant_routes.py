"""The assistants endpoints, as `langgraph_sdk`'s `client.assistants` calls them: create,
get, update (a new version), delete, search, count, versions, set latest, graph, schemas.

Bodies are pydantic models shaped after the SDK's payloads: a wrong type is a 422 before
anything is read or written. Built-in assistants (the config-file agents, the workflows) are
read-only: changing one is a 409 that says to create an assistant on its graph instead. A saved
assistant is its creator's: to anyone else it is a 404 on every route and absent from searches
(its id stays taken: `POST /assistants` with it is a 409, as for your own).
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter
from pydantic import Field

from ..client import assistant_rows
from ..client.agent_config import config_schema
from ..errors import NotFoundError
from .assistants_store import SavedAssistant, all_views, check_saved, find, graph_of, saved_view
from .deps import JSON, Ctx, CtxDep, ProtocolError
from .views import NODE
from .wire import Id, JSONObject, Limit, Offset, Text, Wire


class _Body(Wire):
    """Strict types and storable text as every protocol body (`wire.py`)."""


class AssistantCreate(_Body):
    graph_id: Id
    assistant_id: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    config: JSONObject = Field(default_factory=dict)
    context: JSONObject = Field(default_factory=dict)
    metadata: JSONObject = Field(default_factory=dict)
    if_exists: Literal["raise", "do_nothing"] = "raise"
    name: Annotated[Text, Field(max_length=200)] | None = None
    description: Text | None = None


class AssistantPatch(_Body):
    graph_id: Id | None = None
    config: JSONObject | None = None
    context: JSONObject | None = None
    metadata: JSONObject | None = None
    name: Annotated[Text, Field(max_length=200)] | None = None
    description: Text | None = None


class AssistantSearch(_Body):
    graph_id: Id | None = None
    name: Text | None = None
    metadata: JSONObject | None = None
    limit: Limit = 10
    offset: Offset = 0
    sort_by: Text | None = None
    sort_order: Literal["asc", "desc"] | None = None
    select: list[Text] | None = None


class VersionsSearch(_Body):
    metadata: JSONObject | None = None
    limit: Limit = 10
    offset: Offset = 0


class SetLatest(_Body):
    version: int = Field(ge=1)


def _matches(view: JSON, body: AssistantSearch | VersionsSearch, graphs: set[str] | None = None
             ) -> bool:
    """Whether an assistant's view fits a search; `graphs`: the graph ids the searched
    `graph_id` stands for (an alias such as "agent" names the lead's graph)."""
    if isinstance(body, AssistantSearch):
        if body.graph_id and view["graph_id"] not in (graphs or {body.graph_id}):
            return False
        if body.name and body.name.lower() not in (view["name"] or "").lower():
            return False
    meta = view.get("metadata") or {}
    return all(meta.get(k) == v for k, v in (body.metadata or {}).items())


async def _saved(ctx: Ctx, assistant_id: str) -> SavedAssistant:
    assistant = await find(ctx.p, assistant_id, user=ctx.user)
    if not isinstance(assistant, SavedAssistant):
        raise ProtocolError(
            409,
            f"assistant {assistant_id} is built in (a config-file agent or a workflow) and "
            f"read-only; create an assistant on graph {assistant.graph_id!r} to configure it",
        )
    return assistant


def _is_builtin(ctx: Ctx, assistant_id: str) -> bool:
    try:
        ctx.p.assistant(assistant_id)
    except NotFoundError:
        return False
    return True


def add_assistants(router: APIRouter) -> None:
    @router.post("/assistants")
    async def create(body: AssistantCreate, ctx: Ctx = CtxDep) -> JSON:
        graph = graph_of(ctx.p, body.graph_id)
        if body.assistant_id is not None and _is_builtin(ctx, body.assistant_id):
            raise ProtocolError(409, f"assistant {body.assistant_id} is built in")
        if body.assistant_id is not None:
            held = await assistant_rows.get(ctx.p.client.admin.store, body.assistant_id)
            if held is not None:  # another user's too: its id is taken (never its content)
                if body.if_exists == "do_nothing" and held.visible_to(ctx.user):
                    return saved_view(held)
                raise ProtocolError(409, f"assistant {body.assistant_id} already exists")
        check_saved(ctx.p, graph, body.config, body.context)
        row = await assistant_rows.create(
            ctx.p.client.admin.store,
            graph_id=graph.graph_id,
            config=body.config,
            context=body.context,
            metadata=body.metadata,
            name=body.name,
            description=body.description,
            assistant_id=body.assistant_id,
            if_exists=body.if_exists,
            user_id=ctx.user,
        )
        return saved_view(row)

    @router.post("/assistants/search")
    async def search(body: AssistantSearch | None = None, ctx: Ctx = CtxDep) -> list[JSON]:
        body = body or AssistantSearch()
        graphs = ctx.p.graph_ids(body.graph_id) if body.graph_id else None
        out = [v for v in await all_views(ctx.p, ctx.user) if _matches(v, body, graphs)]
        key = body.sort_by
        if key in ("assistant_id", "graph_id", "name", "created_at", "updated_at"):
            out.sort(key=lambda a: str(a[key] or ""), reverse=body.sort_order == "desc")
        page = out[body.offset : body.offset + body.limit]
        if body.select:
            page = [{k: v for k, v in a.items() if k in body.select} for a in page]
        return page

    @router.post("/assistants/count")
    async def count(body: AssistantSearch | None = None, ctx: Ctx = CtxDep) -> int:
        body = body or AssistantSearch()
        graphs = ctx.p.graph_ids(body.graph_id) if body.graph_id else None
        return len([v for v in await all_views(ctx.p, ctx.user) if _matches(v, body, graphs)])

    @router.get("/assistants/{assistant_id}")
    async def get(assistant_id: str, ctx: Ctx = CtxDep) -> JSON:
        assistant = await find(ctx.p, assistant_id, user=ctx.user)
        views = {v["assistant_id"]: v for v in await all_views(ctx.p, ctx.user)}
        return views[assistant.assistant_id]

    @router.patch("/assistants/{assistant_id}")
    async def update(assistant_id: str, body: AssistantPatch, ctx: Ctx = CtxDep) -> JSON:
        saved = await _saved(ctx, assistant_id)
        changes = body.model_dump(exclude_none=True)
        graph = graph_of(ctx.p, body.graph_id or saved.graph_id)
        changes["graph_id"] = graph.graph_id
        check_saved(
            ctx.p, graph, changes.get("config", saved.row.config), changes.get("context", saved.row.context)
        )
        row = await assistant_rows.update(ctx.p.client.admin.store, assistant_id, changes)
        return saved_view(row)

    @router.delete("/assistants/{assistant_id}", status_code=204)
    async def delete(assistant_id: str, ctx: Ctx = CtxDep) -> None:
        await _saved(ctx, assistant_id)
        await assistant_rows.delete(ctx.p.client.admin.store, assistant_id)

    @router.post("/assistants/{assistant_id}/versions")
    async def versions(
        assistant_id: str, body: VersionsSearch | None = None, ctx: Ctx = CtxDep
    ) -> list[JSON]:
        body = body or VersionsSearch()
        assistant = await find(ctx.p, assistant_id, user=ctx.user)
        if not isinstance(assistant, SavedAssistant):
            return []  # a built-in assistant has one version, never stored
        rows = await assistant_rows.versions(ctx.p.client.admin.store, assistant_id)
        out = [saved_view(r) for r in rows]
        out = [v for v in out if _matches(v, body)]
        return out[body.offset : body.offset + body.limit]

    @router.post("/assistants/{assistant_id}/latest")
    async def latest(assistant_id: str, body: SetLatest, ctx: Ctx = CtxDep) -> JSON:
        await _saved(ctx, assistant_id)
        row = await assistant_rows.set_latest(ctx.p.client.admin.store, assistant_id, body.version)
        return saved_view(row)

    @router.get("/assistants/{assistant_id}/graph")
    async def graph(assistant_id: str, ctx: Ctx = CtxDep) -> JSON:
        await find(ctx.p, assistant_id, user=ctx.user)
        nodes = ["__start__", "lead_agent", NODE, "subagent", "__end__"]
        edges = [
            ("__start__", "lead_agent", False),
            ("lead_agent", NODE, True),
            ("lead_agent", "subagent", True),
            ("lead_agent", "__end__", True),
            (NODE, "lead_agent", False),
            ("subagent", "lead_agent", False),
        ]
        return {
            "nodes": [{"id": n, "type": "runnable", "data": n} for n in nodes],
            "edges": [{"source": s, "target": t, "conditional": c} for s, t, c in edges],
        }

    @router.get("/assistants/{assistant_id}/schemas")
    async def schemas(assistant_id: str, ctx: Ctx = CtxDep) -> JSON:
        a = await find(ctx.p, assistant_id, user=ctx.user)
        messages = {
            "type": "object",
            "properties": {"messages": {"type": "array", "items": {"type": "object"}}},
        }
        agent = a.kind != "workflow"
        empty: JSON = {"type": "object", "properties": {}}
        return {
            "graph_id": a.graph_id,
            "input_schema": messages,
            "output_schema": messages,
            "state_schema": messages,
            "config_schema": config_schema() if agent else empty,
            "context_schema": config_schema() if agent else empty,
        }

    @router.get("/assistants/{assistant_id}/subgraphs")
    async def subgraphs(assistant_id: str, ctx: Ctx = CtxDep) -> JSON:
        await find(ctx.p, assistant_id, user=ctx.user)
        return {}
