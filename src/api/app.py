"""The HTTP/SSE server: a thin FastAPI layer over one `Client`.

- One client per process (the graph is compiled once), opened in the lifespan from settings
  or a factory, or handed in ready-made (`create_app(client=...)`, for tests and embedding:
  the caller keeps ownership and closes it).
- Runs live in the background, independent of any HTTP connection: `POST /chat` answers 202
  with a `stream_url`; streams only follow, and a dropped stream resumes with `Last-Event-ID`.
- Concurrency: beyond `run.max_concurrent_runs` runs in flight, `POST /chat` and resume answer
  429 with `Retry-After` (see `limits.py` for why not a queue).
- Graceful shutdown (`serve`): on SIGTERM/SIGINT uvicorn stops accepting connections, open
  event streams are ended at once (clients reconnect with `Last-Event-ID` once the server is
  back), and the lifespan closes the client, which cancels runs still in flight: each is
  marked `cancelled` with its partial answer and a final `cancelled` event, so no message is
  left `running`. Paused messages are untouched and can be resumed after a restart.
- OpenAPI at `/openapi.json`, interactive docs at `/docs`
  (offline: assets from a package), the web page at `/` (`page.py`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import uvicorn
from fastapi import FastAPI
from starlette.routing import Route

from ..client import Client
from ..protocol import protocol_router
from ..protocol.loops import PlatformLoops
from ..settings import ServerSettings, Settings, load_settings
from ..version import __version__
from .a2a import router as a2a_router
from .auth import RedactTokens, auth_enabled
from .cors import LazyCORS
from .deps import API_PREFIX
from .errors import CatchAllMiddleware, install_error_handlers
from .limits import BodyLimitMiddleware, RunLimiter
from .mcp_optional import mcp_endpoint
from .openapi import install_openapi
from .page import install_page
from .page import router as page_router
from .routes_chat import router as chat_router
from .routes_data import router as data_router
from .routes_memory import router as memory_router
from .routes_platform import router as assistants_router
from .routes_workflows import publish_inputs
from .routes_workflows import router as workflows_router
from .sse import drain_streams

SHUTDOWN_GRACE_SECONDS = 5.0

ClientFactory = Callable[[], Awaitable[Client]]


def _attach(app: FastAPI, client: Client, host: str) -> None:
    settings: Settings = client.settings
    state = app.state
    state.client = client
    state.settings = settings
    state.auth_enabled = auth_enabled(settings.auth.enabled, host)
    state.limiter = RunLimiter(settings.run.max_concurrent_runs, settings.run.max_runs_per_database)
    state.heartbeat_seconds = settings.server.heartbeat_seconds
    state.max_request_bytes = settings.server.max_request_bytes
    state.cors_origins = settings.server.cors_origins


def create_app(
    source: Settings | ClientFactory | None = None,
    *,
    client: Client | None = None,
    host: str = "127.0.0.1",
) -> FastAPI:
    """Build the app from settings (default: `load_settings()`), a client factory, or a ready
    client. `host` is where the server binds: it decides whether auth is on when
    `auth.enabled` is unset (on unless loopback)."""
    factory: ClientFactory
    if isinstance(source, Settings):
        settings = source

        async def open_with_settings() -> Client:
            return await Client.open(settings)

        factory = open_with_settings
    elif source is None:

        async def open_with_loaded() -> Client:
            return await Client.open(load_settings())

        factory = open_with_loaded
    else:
        factory = source

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = app.state.client is None
        if owned:
            _attach(app, await factory(), host)
        loops = PlatformLoops(app.state).start()  # crons and the store's TTL sweeper
        try:
            async with mcp.running():  # the assistants as MCP tools at /mcp (mcp_server.py)
                yield
        finally:
            await loops.stop()
            drain_streams(app.state.streams)
            protocol = getattr(app.state, "protocol", None)
            if protocol is not None:
                await protocol.aclose()
            if owned:
                current, app.state.client = app.state.client, None
                await current.aclose()

    app = FastAPI(
        title="artifactflow",
        version=__version__,
        summary="Multi-agent runs with durable permission pauses, event streams and artifacts",
        lifespan=lifespan,
        docs_url=None,  # served by install_page from packaged assets, not a CDN
        redoc_url=None,
    )
    app.state.client = None
    mcp = mcp_endpoint(app.state)  # 501 naming the `mcp` extra when it is not installed
    app.state.streams = set()
    app.state.max_request_bytes = ServerSettings().max_request_bytes  # until settings are known
    if client is not None:
        _attach(app, client, host)
    install_error_handlers(app)
    install_openapi(app, lambda schema, client: publish_inputs(schema, client.workflows.list()))
    app.add_middleware(BodyLimitMiddleware, limit=lambda: app.state.max_request_bytes)
    app.add_middleware(CatchAllMiddleware)
    # Outermost: preflights are answered, and errors (413, 500) carry the CORS headers too.
    app.add_middleware(LazyCORS, origins=lambda: getattr(app.state, "cors_origins", None))
    app.include_router(chat_router, prefix=API_PREFIX)
    app.include_router(data_router, prefix=API_PREFIX)
    app.include_router(workflows_router, prefix=API_PREFIX)
    app.include_router(memory_router, prefix=API_PREFIX)
    app.include_router(assistants_router, prefix=API_PREFIX)  # the page's picker
    app.include_router(page_router, prefix=API_PREFIX)
    app.include_router(protocol_router())  # the Agent Protocol, at the root
    app.router.routes.append(Route("/mcp", mcp, methods=["GET", "POST", "DELETE"]))
    app.include_router(a2a_router)  # A2A: agent cards and /a2a/{assistant_id} (a2a.py)
    install_page(app)
    return app


class Server(uvicorn.Server):
    """uvicorn's server, ending open event streams as soon as shutdown begins (otherwise
    uvicorn would wait for them until its graceful-shutdown timeout)."""

    def __init__(self, config: uvicorn.Config, app: FastAPI) -> None:
        super().__init__(config)
        self.app = app

    async def shutdown(self, sockets: Any = None) -> None:
        drain_streams(self.app.state.streams)
        await super().shutdown(sockets)


def server_for(app: FastAPI, host: str = "127.0.0.1", port: int = 8000, **config: Any) -> Server:
    """A uvicorn server for `app` (run it with `.run()` or `await .serve()`)."""
    config.setdefault("timeout_graceful_shutdown", SHUTDOWN_GRACE_SECONDS)
    config.setdefault("log_level", "info")
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, RedactTokens) for f in access.filters):
        access.addFilter(RedactTokens())
    return Server(uvicorn.Config(app, host=host, port=port, **config), app)


def serve(
    settings: Settings | None = None, host: str = "127.0.0.1", port: int = 8000, **config: Any
) -> None:
    """Run the server until SIGINT/SIGTERM (blocking). Extra keywords go to `uvicorn.Config`."""
    app = create_app(settings or load_settings(), host=host)
    server_for(app, host, port, **config).run()


__all__ = ["Server", "create_app", "serve", "server_for"]
