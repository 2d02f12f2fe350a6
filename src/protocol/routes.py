"""The Agent Protocol's endpoints, as `langgraph_sdk` calls them (`protocol_router()`): meta and
assistants here, threads in `threads.py`, runs in `runs.py`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body

from ..version import __version__
from .deps import JSON, Ctx, CtxDep, ProtocolError, ProtocolRoute
from .runs import add_runs
from .store import store_router
from .threads import add_threads
from .views import NODE, iso
from .wire import AssistantCount, AssistantSearch

__all__ = ["ProtocolError", "protocol_router"]


def protocol_router() -> APIRouter:
    """The LangGraph Agent Server API at the server root. Reads `app.state.client` and
    `app.state.auth_enabled` (set by the HTTP app); includes the store endpoints
    (`store.py`)."""
    # Not in our OpenAPI document: LangGraph's clients are the protocol's spec, and its paths
    # overlap by design (`GET /threads/search` is thread "search", not a 405).
    router = APIRouter(route_class=ProtocolRoute, tags=["agent protocol"], include_in_schema=False)
    add_meta(router)
    add_assistants(router)
    add_threads(router)
    add_runs(router)
    router.include_router(store_router())
    return router


# --- meta and assistants -----------------------------------------------------------------------


def add_meta(router: APIRouter) -> None:
    @router.get("/ok")
    async def ok() -> JSON:
        return {"ok": True}

    @router.get("/info")
    async def info() -> JSON:
        return {
            "version": __version__,
            "langgraph_py_version": None,
            "flags": {"assistants": True, "crons": False, "langsmith": False},
            "host": {"kind": "artifactflow"},
        }


def _assistant_view(a: Any, created: float | None = None) -> JSON:
    return {
        "assistant_id": a.assistant_id,
        "graph_id": a.graph_id,
        "name": a.name,
        "description": a.description,
        "config": {},
        "context": {},
        "metadata": {"kind": a.kind},
        "version": 1,
        "created_at": iso(created or 0),
        "updated_at": iso(created or 0),
    }


def _matching(ctx: Ctx, metadata: JSON | None, graph_id: str | None, name: str | None
              ) -> list[JSON]:
    out = [_assistant_view(a) for a in ctx.p.assistants()]
    if graph_id:  # an alias ("agent") names the same graph as its id
        out = [a for a in out if a["graph_id"] in ctx.p.graph_ids(graph_id)]
    if name:
        out = [a for a in out if name in a["name"]]
    if metadata:
        out = [a for a in out if all(a["metadata"].get(k) == v for k, v in metadata.items())]
    return out


def add_assistants(router: APIRouter) -> None:
    @router.post("/assistants/search")
    async def search(
        body: Annotated[AssistantSearch, Body()] = AssistantSearch(), ctx: Ctx = CtxDep
    ) -> list[JSON]:
        found = _matching(ctx, body.metadata, body.graph_id, body.name)
        key = body.sort_by
        if key in ("assistant_id", "graph_id", "name", "created_at", "updated_at"):
            found.sort(key=lambda a: a[key], reverse=body.sort_order == "desc")
        page = found[body.offset : body.offset + body.limit]
        if body.select:
            page = [{k: v for k, v in a.items() if k in body.select} for a in page]
        return page

    @router.post("/assistants/count")
    async def count(
        body: Annotated[AssistantCount, Body()] = AssistantCount(), ctx: Ctx = CtxDep
    ) -> int:
        return len(_matching(ctx, body.metadata, body.graph_id, body.name))

    @router.get("/assistants/{assistant_id}")
    async def get(assistant_id: str, ctx: Ctx = CtxDep) -> JSON:
        return _assistant_view(ctx.p.assistant(assistant_id))

    @router.get("/assistants/{assistant_id}/graph")
    async def graph(assistant_id: str, ctx: Ctx = CtxDep) -> JSON:
        ctx.p.assistant(assistant_id)
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
        a = ctx.p.assistant(assistant_id)
        messages = {
            "type": "object",
            "properties": {"messages": {"type": "array", "items": {"type": "object"}}},
        }
        return {
            "graph_id": a.graph_id,
            "input_schema": messages,
            "output_schema": messages,
            "state_schema": messages,
            "config_schema": {"type": "object", "properties": {}},
            "context_schema": {"type": "object", "properties": {}},
        }

    @router.get("/assistants/{assistant_id}/subgraphs")
    async def subgraphs(assistant_id: str, ctx: Ctx = CtxDep) -> JSON:
        ctx.p.assistant(assistant_id)
        return {}
