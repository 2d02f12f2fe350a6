"""The Agent Protocol's endpoints, as `langgraph_sdk` calls them (`protocol_router()`): meta here,
assistants, crons and webhooks in `platform.py`, threads in `threads.py`, runs in `runs.py`."""

from __future__ import annotations

from fastapi import APIRouter

from ..version import __version__
from .deps import JSON, ProtocolError, ProtocolRoute
from .platform import add_platform
from .runs import add_runs
from .store import store_router
from .store_ttl import request_store
from .threads import add_threads

__all__ = ["ProtocolError", "protocol_router"]


def protocol_router() -> APIRouter:
    """The LangGraph Agent Server API at the server root. Reads `app.state.client` and
    `app.state.auth_enabled` (set by the HTTP app); includes the store endpoints
    (`store.py`)."""
    # Not in our OpenAPI document: LangGraph's clients are the protocol's spec, and its paths
    # overlap by design (`GET /threads/search` is thread "search", not a 405).
    router = APIRouter(route_class=ProtocolRoute, tags=["agent protocol"], include_in_schema=False)
    add_meta(router)
    add_platform(router)  # assistants, crons, webhooks (platform.py, issue 35)
    add_threads(router)
    add_runs(router)
    router.include_router(store_router(request_store))  # with TTL (store_ttl.py)
    return router


# --- meta -----------------------------------------------------------------------


def add_meta(router: APIRouter) -> None:
    @router.get("/ok")
    async def ok() -> JSON:
        return {"ok": True}

    @router.get("/info")
    async def info() -> JSON:
        return {
            "version": __version__,
            "langgraph_py_version": None,
            "flags": {"assistants": True, "crons": True, "langsmith": False},
            "host": {"kind": "artifactflow"},
            "store": {"ttl": {"supported": True, "refresh_on_read": True}},
        }
