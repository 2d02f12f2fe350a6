"""CORS for browser apps on another origin (a `useStream` app on a dev server, agent-chat-ui
without its passthrough): Starlette's `CORSMiddleware` with the origins of
`server.cors_origins` (or `artifactflow serve --cors-origin`). The settings may arrive only
when the server starts (a client factory), so the middleware is built on the first request
that finds them; with no origins it is not in the way at all (no CORS headers, as before).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

ALLOW_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
# What the LangGraph SDK and our own clients send; `Last-Event-ID` reconnects a stream.
ALLOW_HEADERS = (
    "Authorization",
    "X-Api-Key",
    "Content-Type",
    "Last-Event-ID",
    "Accept",
    "Cache-Control",
)
# The SDK reads `Location`/`Content-Location` of a run's stream to rejoin it.
EXPOSE_HEADERS = ("Location", "Content-Location", "Retry-After")
MAX_AGE = 600


class LazyCORS:
    """`CORSMiddleware` for the origins `origins()` returns once they are known."""

    def __init__(self, app: ASGIApp, origins: Callable[[], Sequence[str] | None]) -> None:
        self.app = app
        self.origins = origins
        self._built: tuple[tuple[str, ...], ASGIApp] | None = None

    def _inner(self) -> ASGIApp:
        origins = tuple(self.origins() or ())
        if not origins:
            return self.app
        if self._built is None or self._built[0] != origins:
            self._built = (origins, cors_middleware(self.app, origins))
        return self._built[1]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self._inner()(scope, receive, send)


def cors_middleware(app: ASGIApp, origins: Sequence[str]) -> CORSMiddleware:
    return CORSMiddleware(
        app,
        allow_origins=list(origins),
        allow_methods=list(ALLOW_METHODS),
        allow_headers=list(ALLOW_HEADERS),
        expose_headers=list(EXPOSE_HEADERS),
        # Tokens travel in headers, never cookies; credentials cannot go with "*" anyway.
        allow_credentials=False,
        max_age=MAX_AGE,
    )


__all__ = ["LazyCORS", "cors_middleware"]
