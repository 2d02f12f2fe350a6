"""Request-scoped access to the process-wide objects the app holds in `app.state`."""

from __future__ import annotations

from typing import Any

from fastapi import Request

from ..client import Client
from .errors import ApiError
from .models import ErrorBody

API_PREFIX = "/api/v1"
MAX_INT = 2**31 - 1  # bound for ids, versions and offsets (SQLite integers are 64-bit)


def get_client(request: Request) -> Client:
    client = request.app.state.client
    if client is None:
        raise ApiError(503, "unavailable", "the server is starting or shutting down; retry shortly")
    return client


def api_url(request: Request, path: str) -> str:
    """A URL path under the API prefix, honouring a mount point (`root_path`)."""
    return f"{request.scope.get('root_path', '')}{API_PREFIX}{path}"


_ERROR_TEXT = {
    400: "Malformed request body",
    401: "Missing or invalid bearer token",
    404: "Not found, or not yours",
    409: "Conflict with the message's state",
    413: "Request body too large",
    422: "Invalid request",
    429: "Too many runs in progress; see Retry-After",
}


def error_docs(*statuses: int, streaming: bool = False) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for the error statuses an endpoint can return.

    `streaming`: the endpoint's success type is not JSON, so the JSON error bodies are
    declared by reference (FastAPI would otherwise file them under the success media type)."""
    codes = (401, 422, *statuses)
    if streaming:
        ref = {"schema": {"$ref": "#/components/schemas/ErrorBody"}}
        return {
            s: {"description": _ERROR_TEXT[s], "content": {"application/json": ref}} for s in codes
        }
    return {s: {"model": ErrorBody, "description": _ERROR_TEXT[s]} for s in codes}
