"""One MCP server's connection: a long-lived owner task per session, restart on next use.

The SDK's client lives in anyio task groups that must be entered and left by the same task,
while our tool calls arrive from whichever task runs the tool node. So each session is one
owner task that enters the SDK `Client`, lists the tools, then serves calls sent to it
through a queue (each call a child task, so calls run concurrently) until it is told to stop
or the connection drops; callers wait on futures. Cancelling a caller (run cancel, tool
timeout) cancels its call inside the owner, which makes the SDK tell the server.

A dropped connection is noticed by a tap on the transport's read stream, even while idle:
the session is marked gone, calls in flight fail, and the next call starts a new session.
A call that fails with "connection closed" is never retried: the server may have acted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio

from ...settings.mcp import McpServerConfig

log = logging.getLogger("artifactflow.mcp")
CLOSE_TIMEOUT = 5.0
_LIST_PAGES = 100


class McpUnavailable(Exception):
    """The server is not running and could not be (re)started; the text is for the model."""


@dataclass
class _Job:
    name: str
    arguments: dict[str, Any]
    future: asyncio.Future[Any]
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


class _Session:
    """One connection's lifetime, owned by a single task."""

    def __init__(self, connection: McpConnection) -> None:
        self._connection = connection
        self._jobs: asyncio.Queue[_Job | None] = asyncio.Queue()
        self._ready: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._gone = anyio.Event()
        self._task: asyncio.Task[None] | None = None
        self.alive = False

    async def open(self, seconds: float) -> list[Any]:
        self._task = asyncio.create_task(self._run(), name=f"mcp:{self._connection.name}")
        try:
            async with asyncio.timeout(seconds):
                tools = await asyncio.shield(self._ready)
        except TimeoutError:
            await self.close()
            raise McpUnavailable(f"no answer within {seconds:g} s (startup_timeout)") from None
        except BaseException:
            await self.close()
            raise
        self.alive = True
        return tools

    async def call(self, name: str, arguments: dict[str, Any]) -> Any:
        if not self.alive:
            raise McpUnavailable("the connection is closed")
        job = _Job(name, arguments, asyncio.get_running_loop().create_future())
        self._jobs.put_nowait(job)
        try:
            return await job.future
        except asyncio.CancelledError:
            job.scope.cancel()
            raise

    async def close(self) -> None:
        """Stop gracefully (the SDK shuts the server down); cancel a start still under way."""
        started = self.alive
        self.alive = False
        task = self._task
        if task is None or task.done():
            return
        self._jobs.put_nowait(None)
        done: set[Any] = set()
        if started:
            done, _ = await asyncio.wait({task}, timeout=CLOSE_TIMEOUT)
        if not done:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        if self._ready.done() and not self._ready.cancelled():
            self._ready.exception()  # a failed start was reported by open(); mark it read

    async def _run(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(self._connection.client(self._gone))
                tools = await _list_tools(client)
                self._ready.set_result(tools)
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._watch, tg.cancel_scope)
                    while (job := await self._jobs.get()) is not None:
                        tg.start_soon(self._serve, client, job)
                    tg.cancel_scope.cancel()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc if isinstance(exc, Exception) else McpUnavailable(
                    f"start-up interrupted ({type(exc).__name__})"))
            elif isinstance(exc, Exception):
                log.debug("MCP server '%s': session ended: %r", self._connection.name, exc)
            if not isinstance(exc, Exception):
                raise
        finally:
            self.alive = False
            self._fail_waiting()

    async def _watch(self, scope: anyio.CancelScope) -> None:
        await self._gone.wait()
        if self.alive:
            log.warning("MCP server '%s' stopped; it will be restarted on its next call",
                        self._connection.name)
        self.alive = False
        scope.cancel()

    async def _serve(self, client: Any, job: _Job) -> None:
        if job.future.done():
            return
        result: Any = None  # stays None only when the scope swallowed a cancel (below)
        try:
            with job.scope:
                result = await client.call_tool(job.name, job.arguments)
        except anyio.get_cancelled_exc_class():  # the session is going down
            self.alive = False
            _settle(job, exc=McpUnavailable(self._connection.stopped_text()))
            raise
        except Exception as exc:
            if _is_transport_failure(exc):
                self.alive = False
                self._gone.set()
                exc = McpUnavailable(self._connection.stopped_text())
            _settle(job, exc=exc)
            return
        if job.scope.cancelled_caught:
            _settle(job, exc=McpUnavailable("the call was cancelled"))
        else:
            _settle(job, result=result)

    def _fail_waiting(self) -> None:
        while not self._jobs.empty():
            job = self._jobs.get_nowait()
            if job is not None:
                _settle(job, exc=McpUnavailable(self._connection.stopped_text()))


def _settle(job: _Job, *, result: Any = None, exc: BaseException | None = None) -> None:
    if job.future.done():
        return
    if exc is not None:
        job.future.set_exception(exc)
    else:
        job.future.set_result(result)


def _is_transport_failure(exc: Exception) -> bool:
    from mcp.shared.exceptions import MCPError
    from mcp_types import CONNECTION_CLOSED

    if isinstance(exc, MCPError):
        return exc.code == CONNECTION_CLOSED
    return isinstance(exc, (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError)) or (
        type(exc).__module__.startswith(("httpx", "httpcore"))
    )


async def _list_tools(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    for _ in range(_LIST_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _reason(exc: BaseException) -> str:
    """The messages inside `exc`, task groups unwrapped (the SDK nests them several deep),
    each distinct message once."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(dict.fromkeys(_reason(e) for e in exc.exceptions))
    return " ".join(str(exc).split()) or type(exc).__name__


class McpConnection:
    """A configured server: its tool list, its current session, restarts on next use."""

    def __init__(self, name: str, config: McpServerConfig, *, config_dir: Path, log_dir: Path):
        self.name = name
        self.config = config
        self.config_dir = config_dir
        self.log_path = log_dir / f"mcp-{name}.log"
        self._log_offset = 0
        self.tools: list[Any] = []
        self.starts = 0
        self._session: _Session | None = None
        self._lock = asyncio.Lock()
        self._closed = False

    def describe(self) -> str:
        if self.config.command:
            return "stdio: " + shlex.join([self.config.command, *self.config.args])
        return f"{self.config.kind}: {self.config.url}"

    def stopped_text(self) -> str:
        return (
            f"MCP server '{self.name}' stopped while this call was running (connection closed); "
            "it will be restarted on the next call. Check whether the call took effect before "
            "retrying."
        )

    async def start(self) -> list[Any]:
        """First start: the tool list, or an exception saying why the server is not usable."""
        async with self._lock:
            self.tools = await self._new_session()
        return self.tools

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        session = self._session
        if session is None or not session.alive:
            session = await self._restart()
        return await session.call(tool, arguments)

    async def aclose(self) -> None:
        async with self._lock:
            self._closed = True
            if self._session is not None:
                await self._session.close()
                self._session = None

    async def _restart(self) -> _Session:
        async with self._lock:
            if self._closed:
                raise McpUnavailable(f"MCP server '{self.name}' is shut down")
            if self._session is not None and self._session.alive:
                return self._session
            if self._session is not None:
                await self._session.close()
                self._session = None
            try:
                await self._new_session()
            except Exception as exc:
                raise McpUnavailable(
                    f"MCP server '{self.name}' is not running and could not be restarted: "
                    f"{self.explain(exc)}"
                ) from exc
            log.info("MCP server '%s' restarted", self.name)
            assert self._session is not None
            return self._session

    async def _new_session(self) -> list[Any]:
        session = _Session(self)
        tools = await session.open(self.config.startup_timeout)
        self._session = session
        self.starts += 1
        return tools

    def explain(self, exc: BaseException) -> str:
        """Why a start failed, with the end of the server's stderr (once) when there is one."""
        text = _reason(exc)
        tail = _tail(self.log_path, self._log_offset) if self.config.command else ""
        if tail:
            text += f". The server's stderr ({self.log_path}) ends with:\n{tail}"
        return text

    # --- transport -----------------------------------------------------------------------------

    @asynccontextmanager
    async def client(self, gone: anyio.Event) -> AsyncIterator[Any]:
        """The SDK client over a tapped transport; `gone` is set when the connection drops."""
        from mcp import Client
        from mcp_types import Implementation

        async with Client(
            _tapped(self._transport(), gone),
            client_info=Implementation(name="artifactflow", version="0.1.0"),
            cache=None,
        ) as client:
            yield client

    @asynccontextmanager
    async def _transport(self) -> AsyncIterator[Any]:
        config = self.config
        if config.command:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            cwd = config.cwd
            if cwd is not None and not cwd.is_absolute():
                cwd = self.config_dir / cwd
            params = StdioServerParameters(
                command=config.command, args=list(config.args), env=config.resolved_env(), cwd=cwd
            )
            errlog = _open_log(self.log_path)
            self._log_offset = errlog.tell()
            try:
                async with stdio_client(params, errlog=errlog) as streams:
                    yield streams
            finally:
                errlog.close()
            return
        headers = config.resolved_headers()
        assert config.url is not None
        if config.transport == "sse":
            from mcp.client.sse import sse_client

            async with sse_client(config.url, headers=headers) as streams:
                yield streams
            return
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        # the MCP transports' own defaults (30 s, a 5 minute read for held-open streams),
        # without reaching into the SDK's private helper module
        timeout = httpx2.Timeout(30.0, read=300.0)
        async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
            async with streamable_http_client(config.url, http_client=http) as streams:
                yield streams


@asynccontextmanager
async def _tapped(transport: Any, gone: anyio.Event) -> AsyncIterator[Any]:
    """Pass the transport's streams through, setting `gone` when its read side ends."""
    async with transport as (read_stream, write_stream):
        send, receive = anyio.create_memory_object_stream[Any](0)

        async def pump() -> None:
            try:
                async with send:
                    async for item in read_stream:
                        await send.send(item)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
            finally:
                gone.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(pump)
            try:
                yield receive, write_stream
            finally:
                tg.cancel_scope.cancel()


def _open_log(path: Path) -> TextIO:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("a", encoding="utf-8")


def _tail(path: Path, offset: int, lines: int = 8) -> str:
    try:
        with path.open("rb") as f:
            f.seek(offset)
            text = f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])
