"""The published OpenAPI schema, finished where FastAPI cannot infer it: event streams.

FastAPI declares a `text/event-stream` response as `{"type": "string"}`. Before OpenAPI 3.2,
the schema of an event-stream media type describes *each event* (`id`, `event`, `data`,
`retry` as an SSE parser reads them); our `data` is one `Event` as JSON, declared with
`contentMediaType`/`contentSchema` so clients and fuzzers (schemathesis) can check it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI

SSE = "text/event-stream"

SSE_EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": (
        "One server-sent event. `id` is the event_id (llm_chunk events carry none: they are "
        "never stored and cannot be resumed from); `event` is the event type."
    ),
    "required": ["data", "event"],
    "properties": {
        "id": {"type": "string", "pattern": "^[0-9]+$"},
        "event": {"type": "string"},
        "data": {
            "type": "string",
            "contentMediaType": "application/json",
            "contentSchema": {"$ref": "#/components/schemas/Event"},
        },
        "retry": {"type": "integer", "minimum": 0},
    },
}


def finish_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Give every event-stream response its per-event schema (in place; returns it)."""
    for item in schema.get("paths", {}).values():
        for operation in item.values():
            for response in (operation.get("responses") or {}).values():
                media = (response.get("content") or {}).get(SSE)
                if media is not None:
                    media["schema"] = SSE_EVENT_SCHEMA
    return schema


def install_openapi(
    app: FastAPI, publish: Callable[[dict[str, Any], Any], dict[str, Any]] | None = None
) -> None:
    """Make `app.openapi()` return the finished schema (built once, like FastAPI's); with
    `publish(schema, client)`, add what only the open client knows (each workflow's input)."""
    build: Callable[[], dict[str, Any]] = app.openapi
    published = False

    def openapi() -> dict[str, Any]:
        nonlocal published
        if app.openapi_schema is None:
            app.openapi_schema = finish_schema(build())
        if publish is not None and not published and app.state.client is not None:
            app.openapi_schema = publish(app.openapi_schema, app.state.client)
            published = True
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
