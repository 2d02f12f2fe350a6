"""Every error leaves the server as `{"error": {"code": ..., "message": ...}}`.

The code is stable (clients branch on it), the message is for people. Library errors map to
HTTP statuses by class; validation errors name the offending field; anything unexpected is
logged with its traceback and answered with a bare `internal_error` — never a stack trace.
A database that is away (down, restarting, disk full, read-only: `core/store/faults.py`) is
not a bug: 503 `database_unavailable` with `Retry-After`.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..client.faults import store_fault
from ..errors import (
    ArtifactConflictError,
    ArtifactFlowError,
    ConfigError,
    InvalidResumeError,
    LLMError,
    MemoryTextError,
    MissingCredentialsError,
    NotFoundError,
    ResumeConflictError,
    StoreUnavailableError,
    UserError,
    WorkflowInputError,
    scrub_secrets,
)

log = logging.getLogger("artifactflow.api")


class ApiError(Exception):
    """An error the API raises itself, with its HTTP status and stable code."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers


# Most specific first: the first matching class wins.
LIBRARY_ERRORS: list[tuple[type[ArtifactFlowError], int, str]] = [
    (NotFoundError, 404, "not_found"),
    (ResumeConflictError, 409, "conflict"),
    (ArtifactConflictError, 409, "conflict"),
    (InvalidResumeError, 422, "invalid_resume"),
    (WorkflowInputError, 422, "validation_error"),  # as a body failing its published schema
    (MemoryTextError, 422, "validation_error"),  # empty or over `memory.max_chars`
    (MissingCredentialsError, 503, "model_not_configured"),
    (ConfigError, 500, "config_error"),
    (UserError, 400, "bad_request"),
    (LLMError, 502, "llm_error"),
]

HTTP_METHODS = {"GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE"}

HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "too_many_runs",
    503: "unavailable",  # also "database_unavailable" (StoreUnavailableError)
}


def error_response(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": code, "message": message}}, status_code=status, headers=headers
    )


def _validation_message(exc: RequestValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "request"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "invalid request: " + "; ".join(parts)


async def _api_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.code, exc.message, exc.headers)


def unavailable_response(exc: StoreUnavailableError) -> JSONResponse:
    """503 for a database that is away: the request was fine, so say when to try again."""
    return error_response(
        503,
        "database_unavailable",
        f"{exc}; try again shortly",
        {"Retry-After": str(exc.retry_after)},
    )


async def _library_error(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, StoreUnavailableError):
        log.warning("%s %s: %s", request.method, request.url.path, exc)
        return unavailable_response(exc)
    for cls, status, code in LIBRARY_ERRORS:
        if isinstance(exc, cls):
            if status >= 500:
                log.error("%s %s: %s", request.method, request.url.path, exc)
            return error_response(status, code, str(exc))
    log.error(
        "%s %s failed: %s: %s", request.method, request.url.path, type(exc).__name__,
        scrub_secrets(str(exc)), exc_info=exc, extra={"unhandled": True},
    )
    return error_response(500, "internal_error", "internal server error; see the server log")


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return error_response(422, "validation_error", _validation_message(exc))


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = HTTP_CODES.get(exc.status_code, "http_error")
    detail: Any = exc.detail
    message = detail if isinstance(detail, str) else str(detail)
    headers = getattr(exc, "headers", None)
    if exc.status_code == 405:
        allow = allowed_methods(request, (headers or {}).get("Allow"))
        headers = {**(headers or {}), "Allow": allow} if allow else headers
    return error_response(exc.status_code, code, message, headers)


def allowed_methods(request: Request, fallback: str | None) -> str | None:
    """Every method the published schema documents for this path (RFC 9110 `Allow`).

    Starlette names only the first matching route's methods, so a path served by a GET and a
    DELETE route would answer `Allow: GET`. Paths outside the schema keep Starlette's answer.
    """
    path = request.scope["path"]
    root = request.scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root) :]
    for template, item in request.app.openapi().get("paths", {}).items():
        pattern = "^" + re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template)) + "$"
        if re.match(pattern, path):
            return ", ".join(sorted(m.upper() for m in item if m.upper() in HTTP_METHODS))
    return fallback


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(ArtifactFlowError, _library_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)


class TrackingSend:
    """An ASGI `send` that remembers whether the response has started: a middleware that
    catches an error can answer it only before that."""

    def __init__(self, send: Any) -> None:
        self.send = send
        self.started = False

    async def __call__(self, message: Any) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        await self.send(message)


class CatchAllMiddleware:
    """Last line of defence: an exception no handler took becomes a logged 500 JSON body.

    A pure ASGI middleware (not an `Exception` handler, which Starlette re-raises after
    answering), so the server and in-process test clients see a normal response.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        tracking = TrackingSend(send)
        try:
            await self.app(scope, receive, tracking)
        except Exception as exc:
            fault = store_fault(exc)  # the database is away: 503, not a bug
            if fault is not None:
                log.warning("%s %s: %s", scope.get("method"), scope.get("path"), fault)
                if not tracking.started:
                    await unavailable_response(fault)(scope, receive, send)
                return
            log.error(  # type, text and traceback, with or without --debug (`unhandled`)
                "unhandled error in %s %s: %s: %s", scope.get("method"), scope.get("path"),
                type(exc).__name__, scrub_secrets(str(exc)), exc_info=exc, extra={"unhandled": True},
            )
            if not tracking.started:
                response = error_response(
                    500, "internal_error", "internal server error; see the server log"
                )
                await response(scope, receive, send)
