"""Request-size and concurrent-run limits.

Runs beyond `run.max_concurrent_runs` are refused with 429 and `Retry-After`, not queued: a
queued run would hold a 202 whose stream stays silent for an unknown time, and a client is
better placed to retry (or tell its user) than the server is to guess. The count is of runs
in flight in this process (new messages and resumes); check-and-start happens under one lock,
so two racing requests cannot both take the last slot. `run.max_runs_per_database` adds a
limit across all workers of one database (counted there, under an advisory lock on
PostgreSQL: see `core/run/workers.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse

from ..client import Client
from ..core.run.workers import RunLimitReached
from .errors import ApiError, TrackingSend, error_response

RETRY_AFTER_SECONDS = 2


def active_runs(client: Client) -> int:
    """Runs in flight in this process."""
    return client.admin.active_run_count()


class RunLimiter:
    def __init__(self, max_runs: int, per_database: int | None = None) -> None:
        self.max_runs = max_runs
        self.per_database = per_database  # run.max_runs_per_database, across all workers
        self._lock = asyncio.Lock()

    @asynccontextmanager
    async def slot(self, client: Client) -> AsyncIterator[None]:
        """Hold the lock while the caller starts a run; refuse when the limit is reached."""
        async with self._lock:
            running = active_runs(client)
            if running >= self.max_runs:
                raise ApiError(
                    429,
                    "too_many_runs",
                    f"{running} runs are in progress (limit run.max_concurrent_runs = "
                    f"{self.max_runs}); retry in a few seconds",
                    headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
                )
            try:
                async with client.admin.run_slot(self.per_database):
                    yield
            except RunLimitReached as exc:
                raise ApiError(
                    429, "too_many_runs", str(exc), headers={"Retry-After": str(RETRY_AFTER_SECONDS)}
                ) from None


class _TooLarge(HTTPException):
    """Raised from `receive`; an HTTPException so request parsing passes it on unchanged."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, f"request body exceeds server.max_request_bytes ({max_bytes} bytes)")


class BodyLimitMiddleware:
    """413 for request bodies over `max_bytes`: by Content-Length up front, or while reading a
    body sent without one."""

    def __init__(self, app: Any, limit: Callable[[], int]) -> None:
        self.app = app
        self.limit = limit

    def _refuse(self, max_bytes: int, scope: Any = None) -> Any:
        message = f"request body exceeds server.max_request_bytes ({max_bytes} bytes)"
        response = error_response(413, "payload_too_large", message)
        if scope is not None and not str(scope.get("path", "")).startswith("/api/"):
            # the Agent Protocol (served at the root) answers `{"detail": ...}`
            body = {"detail": message, "error": {"code": "payload_too_large", "message": message}}
            response = JSONResponse(body, status_code=413)
        return response

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        max_bytes = self.limit()
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                try:
                    too_big = int(value) > max_bytes
                except ValueError:
                    too_big = False
                if too_big:
                    await self._refuse(max_bytes, scope)(scope, receive, send)
                    return
        seen = 0

        async def counting_receive() -> Any:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > max_bytes:
                    raise _TooLarge(max_bytes)
            return message

        tracking = TrackingSend(send)
        try:
            await self.app(scope, counting_receive, tracking)
        except _TooLarge:
            if not tracking.started:
                await self._refuse(max_bytes, scope)(scope, receive, send)
