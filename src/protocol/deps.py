"""What every protocol endpoint shares: the caller (auth), the per-app `Protocol`, and errors
as the protocol answers them (`{"detail": ...}` with 404/409/422)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from fastapi import Depends, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException

from ..client import Client
from ..client.faults import store_fault
from ..errors import (
    InvalidResumeError,
    NotFoundError,
    ResumeConflictError,
    UserError,
)
from . import thread_ids
from .service import Protocol
from .wire import clean_text

JSON = dict[str, Any]
log = logging.getLogger("artifactflow.protocol")


def plain(rows: Any) -> list[JSON]:
    """Store rows (TypedDicts) as plain dicts."""
    return [dict(row) for row in rows]


class ProtocolError(Exception):
    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.headers = status, detail, headers


_STATUS: list[tuple[type[Exception], int]] = [
    (NotFoundError, 404),
    (ResumeConflictError, 409),
    (InvalidResumeError, 422),
    (UserError, 422),
]


def _as_json(request: Request) -> None:
    """Read a body as JSON whatever its `Content-Type`, as LangGraph's server does: a proxy in
    front (agent-chat-ui's API passthrough) may forward it as `text/plain`."""
    headers = request.scope["headers"]
    kind = next((v for k, v in headers if k == b"content-type"), b"")
    if request.method in ("POST", "PUT", "PATCH", "DELETE") and b"json" not in kind:
        request.scope["headers"] = [
            *((k, v) for k, v in headers if k != b"content-type"),
            (b"content-type", b"application/json"),
        ]
        request.__dict__.pop("_headers", None)


class ProtocolRoute(APIRoute):
    """Errors as the protocol answers them: `{"detail": ...}` with 404/409/422; bodies read as
    JSON."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            _as_json(request)
            try:
                _clean_params(request)
                return await handler(request)
            except ProtocolError as exc:
                return JSONResponse({"detail": exc.detail}, exc.status, headers=exc.headers)
            except RequestValidationError as exc:
                return JSONResponse({"detail": validation_detail(exc.errors())}, 422)
            except HTTPException as exc:  # not the /api/v1 error envelope
                return JSONResponse({"detail": exc.detail}, exc.status_code, headers=exc.headers)
            except Exception as exc:
                if store_fault(exc) is not None:
                    raise  # the database is away: the app's 503 with Retry-After
                for cls, status in _STATUS:
                    if isinstance(exc, cls):
                        return JSONResponse({"detail": str(exc)}, status)
                log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
                return JSONResponse({"detail": "internal server error; see the server log"}, 500)

        return guarded


def validation_detail(errors: Sequence[Any]) -> list[JSON]:
    """FastAPI's validation errors without the offending input (`input`, `ctx`): it may be
    a lone surrogate that JSON cannot encode, bytes, or a 300-deep object to echo back."""
    return [
        {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": e.get("type", "")}
        for e in errors
    ]


def _clean_params(request: Request) -> None:
    """422 for a path or query parameter no database can store (NUL, a lone surrogate)."""
    params = [*request.path_params.items(), *request.query_params.multi_items()]
    for name, value in params:
        try:
            clean_text(str(value), name)
        except ValueError as exc:
            raise ProtocolError(422, str(exc)) from None


def protocol_of(request: Request) -> Protocol:
    state = request.app.state
    client: Client | None = state.client
    if client is None:
        raise ProtocolError(503, "the server is starting or shutting down; retry shortly")
    protocol = getattr(state, "protocol", None)
    if protocol is None or protocol.client is not client:
        protocol = state.protocol = Protocol(client)
    return protocol


async def caller(request: Request) -> str | None:
    """The caller: `X-Api-Key: <token>` or `Authorization: Bearer <token>` (None with auth off)."""
    protocol = protocol_of(request)
    if not getattr(request.app.state, "auth_enabled", False):
        return None
    token = request.headers.get("x-api-key")
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    if not token and scheme.lower() == "bearer":
        token = credentials.strip()
    if not token:
        raise ProtocolError(
            401,
            "missing API key: send 'X-Api-Key: <token>' or 'Authorization: Bearer <token>'",
            {"WWW-Authenticate": "Bearer"},
        )
    user = await protocol.client.admin.user_for_token(token)
    if user is None:
        raise ProtocolError(401, "invalid or revoked token", {"WWW-Authenticate": "Bearer"})
    return user


class Ctx:
    """A request's protocol, caller (None with auth off) and SSE heartbeat interval."""

    def __init__(self, protocol: Protocol, user: str | None, heartbeat: float = 0.0) -> None:
        self.p, self.user, self.heartbeat = protocol, user, heartbeat


async def context(request: Request, user: str | None = Depends(caller)) -> Ctx:
    """The request's `Ctx`; a `thread_id` in the path is mapped here to the key of the
    caller's thread of that id (`thread_ids.py`), so the endpoint gets the key (FastAPI
    solves dependencies before it reads path parameters) and every view shows the id back."""
    protocol = protocol_of(request)
    await protocol.records.ready()
    thread_ids.new_context()
    public = request.path_params.get("thread_id")
    if isinstance(public, str):
        try:
            key = await thread_ids.resolve(protocol.client.admin.store, public, user)
        except thread_ids.TakenError:
            raise ProtocolError(404, f"thread {public} not found") from None
        thread_ids.show_as(key, public)
        request.scope["path_params"] = {**request.path_params, "thread_id": key}
    return Ctx(protocol, user, float(getattr(request.app.state, "heartbeat_seconds", 0) or 0))


CtxDep = Depends(context)
