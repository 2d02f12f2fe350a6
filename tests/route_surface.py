"""Every HTTP route the app serves, read from the app itself, and one OpenAPI document for all
of them (tests/test_openapi_fuzz.py, tests/test_route_fuzz.py, tests/test_cross_user_matrix.py).

The published document (`/openapi.json`) holds our own `/api/v1`; the Agent Protocol, A2A and
the page's routes are left out of it on purpose (LangGraph's clients are the protocol's spec).
The fuzzers need them all, so `full_schema` adds the hidden FastAPI routes of a throwaway app
to the published document. A route added later is in `app_routes` (and so in every suite's
coverage check) without anyone listing it.
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute, iter_route_contexts
from starlette.routing import Mount

from artifactflow.api.app import create_app

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
Route = tuple[str, str]  # (method, path template)


def app_routes(app: FastAPI | None = None) -> list[Route]:
    """(method, path) of every route `app` answers, HEAD and static mounts left out."""
    out: list[Route] = []
    for context in iter_route_contexts((app or create_app()).routes):
        if isinstance(context.original_route, Mount) or not context.path:
            continue
        out.extend((m, context.path) for m in sorted(context.methods or ()) if m in METHODS)
    return out


def full_schema(app: FastAPI | None = None) -> dict[str, Any]:
    """The published OpenAPI document plus the FastAPI routes it hides (protocol, A2A, page)."""
    app = app or create_app()
    schema = copy.deepcopy(app.openapi())
    hidden: list[APIRoute] = []
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        if isinstance(route, APIRoute) and not context.include_in_schema:
            assert route.path == context.path, "hidden routes are mounted at the root"
            visible = copy.copy(route)
            visible.include_in_schema = True
            hidden.append(visible)
    extra = get_openapi(title="hidden", version="0", routes=hidden)
    for path, item in extra["paths"].items():
        schema["paths"].setdefault(path, {}).update(item)
    schema.setdefault("components", {}).setdefault("schemas", {})
    for name, body in extra.get("components", {}).get("schemas", {}).items():
        schema["components"]["schemas"].setdefault(name, body)
    return schema


def operations(schema: dict[str, Any]) -> list[Route]:
    return [(m.upper(), p) for p, item in schema["paths"].items() for m in item if m.upper() in METHODS]
