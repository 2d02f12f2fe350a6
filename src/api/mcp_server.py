"""artifactflow as an MCP server: every assistant is a tool (`POST /mcp`, streamable HTTP;
`artifactflow mcp` over stdio), built on the `mcp` package's low-level server.

- `tools/list` is read on every call from the assistants there are now (built-in and saved),
  so an assistant created a moment ago is a tool at once. A tool's name is its assistant id
  with anything outside `[A-Za-z0-9_-]` made `_` (`workflow:report` → `workflow_report`).
- A call runs the assistant on a new thread (or `thread_id`, to continue one) through the
  Agent Protocol's runs (`protocol/service.py`: same queueing, config and webhooks) and waits
  for its end. The result is the final answer as text, plus links to the artifacts the
  conversation holds, and the same as `structuredContent` (answer, thread, message, links).
- A run that pauses for approval is a tool error that names the paused message and says how to
  answer it; a failed run is a tool error with its message. A tool error is the MCP way to tell
  the calling model what happened (it is not a protocol error).
- Auth as the rest of the server: with auth on, `X-Api-Key` or `Authorization: Bearer` on the
  HTTP request, else 401 before the MCP layer sees it; the caller's user owns the runs. The
  HTTP transport is stateless (no session affinity): any worker answers any request.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.responses import JSONResponse
from starlette.types import Receive, Scope, Send

from ..errors import ArtifactFlowError
from ..protocol.assistants_store import all_views
from ..protocol.service import Protocol
from ..protocol.wire import RunCreate
from ..version import __version__

if TYPE_CHECKING:
    from ..client import Client

USER_KEY = "artifactflow.user"
NAME = re.compile(r"[^A-Za-z0-9_-]")

INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "messages": {
            "description": "The request: a string, or chat messages ({role, content}); the last "
            "user message is the task.",
            "anyOf": [
                {"type": "string"},
                {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {"role": {"type": "string"}, "content": {"type": "string"}},
                        "required": ["content"],
                    },
                },
            ],
        },
        "thread_id": {"type": "string", "description": "Continue this thread (else a new one)."},
    },
    "required": ["messages"],
}
WORKFLOW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"input": {"type": "object", "description": "The workflow's input."}},
    "required": ["input"],
}


def tool_name(assistant_id: str) -> str:
    return NAME.sub("_", assistant_id)[:64]


class AssistantTools:
    """The tools/list and tools/call handlers over one client (the HTTP app's or the CLI's)."""

    def __init__(self, client_of: Callable[[], Client | None], base_url: str = "") -> None:
        self.client_of, self.base_url = client_of, base_url.rstrip("/")
        self._protocol: Protocol | None = None

    def protocol(self) -> Protocol:
        client = self.client_of()
        if client is None:
            raise ArtifactFlowError("the server is starting or shutting down; retry shortly")
        if self._protocol is None or self._protocol.client is not client:
            self._protocol = Protocol(client)
        return self._protocol

    async def list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        p = self.protocol()
        await p.records.ready()
        request = getattr(ctx, "request", None)
        user = request.scope.get(USER_KEY) if request is not None else None
        tools = []
        for view in await all_views(p, user):  # the caller's saved assistants, not others'
            workflow = view["graph_id"].startswith("workflow:")
            title = view["name"] or view["assistant_id"]
            tools.append(
                types.Tool(
                    name=tool_name(view["assistant_id"]),
                    title=title,
                    description=(view["description"] or f"Run the assistant {title}.")
                    + " Returns the final answer and links to the artifacts it wrote.",
                    input_schema=WORKFLOW_SCHEMA if workflow else INPUT_SCHEMA,
                )
            )
        return types.ListToolsResult(tools=tools)

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        p = self.protocol()
        await p.records.ready()
        request = getattr(ctx, "request", None)
        user = request.scope.get(USER_KEY) if request is not None else None
        views = {tool_name(v["assistant_id"]): v for v in await all_views(p, user)}
        view = views.get(params.name)
        if view is None:
            return _error(f"no assistant is served as tool {params.name!r}; tools/list names them")
        args = dict(params.arguments or {})
        body: dict[str, Any] = {"assistant_id": view["assistant_id"]}
        if view["graph_id"].startswith("workflow:"):
            body["input"] = args.get("input") or {}
        else:
            messages = args.get("messages")
            if isinstance(messages, str):
                messages = [{"role": "user", "content": messages}]
            if not isinstance(messages, list) or not messages:
                return _error("messages must be a non-empty string or list of {role, content}")
            body["input"] = {"messages": messages}
        thread_id = args.get("thread_id")
        try:
            run, _ = await p.create(thread_id if isinstance(thread_id, str) else None, RunCreate.model_validate(body), user)
            run = await p.join(run)
            return await self._result(p, run)
        except ArtifactFlowError as exc:
            return _error(str(exc))

    async def _result(self, p: Protocol, run: dict[str, Any]) -> types.CallToolResult:
        message: dict[str, Any] = dict(await p.client.conversations.message(run["message_id"]))
        thread_id = run["thread_id"]
        if message["status"] == "waiting":
            calls = (message.get("waiting_for") or {}).get("calls") or []
            names = ", ".join(str(c.get("tool")) for c in calls) or "a tool"
            return _error(
                f"the run paused for approval: message {message['id']} (thread {thread_id}) waits "
                f"for a decision on {names}. Approve or deny it in the artifactflow page, with "
                f"`artifactflow resume {message['id']} --approve`, or POST "
                f"/threads/{thread_id}/runs with command.resume."
            )
        if message["status"] != "completed":
            return _error(
                f"the run ended {message['status']}: {message.get('error') or 'no answer'} "
                f"(message {message['id']}, thread {thread_id})"
            )
        answer = message.get("response") or ""
        links = [
            {
                "artifact_id": a["artifact_id"],
                "title": a.get("title"),
                "url": f"{self.base_url}/api/v1/conversations/{thread_id}/artifacts/{a['artifact_id']}",
            }
            for a in await p.client.artifacts.list(thread_id)
        ]
        content: list[Any] = [types.TextContent(type="text", text=answer)]
        if links:
            lines = "\n".join(f"- {link['title'] or link['artifact_id']}: {link['url']}" for link in links)
            content.append(types.TextContent(type="text", text=f"Artifacts:\n{lines}"))
        structured = {"answer": answer, "thread_id": thread_id, "message_id": message["id"], "artifacts": links}
        return types.CallToolResult(content=content, structured_content=structured)

    def server(self) -> Server[Any]:
        return Server(
            "artifactflow",
            version=__version__,
            instructions="Each tool runs one artifactflow assistant to its final answer.",
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
        )


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


class McpEndpoint:
    """`/mcp` of the HTTP app: auth, then the SDK's stateless streamable-HTTP transport."""

    def __init__(self, state: Any) -> None:
        self.state = state
        self.tools = AssistantTools(lambda: state.client)
        self.manager: StreamableHTTPSessionManager | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The transport's task group, for the app's lifespan (a manager runs once)."""
        self.manager = StreamableHTTPSessionManager(app=self.tools.server(), stateless=True, json_response=True)
        async with self.manager.run():
            yield
        self.manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.manager is None or self.state.client is None:
            await JSONResponse({"detail": "the server is starting or shutting down"}, 503)(scope, receive, send)
            return
        user = None
        if getattr(self.state, "auth_enabled", False):
            headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
            token = headers.get("x-api-key")
            scheme, _, credentials = headers.get("authorization", "").partition(" ")
            if not token and scheme.lower() == "bearer":
                token = credentials.strip()
            user = await self.state.client.admin.user_for_token(token) if token else None
            if user is None:
                response = JSONResponse(
                    {"detail": "missing or invalid API key: send 'Authorization: Bearer <token>'"},
                    401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
                await response(scope, receive, send)
                return
        scope = {**scope, USER_KEY: user}
        await self.manager.asgi_app(scope, receive, send)


async def serve_stdio(client: Client) -> None:
    """`artifactflow mcp`: the same tools over stdin/stdout, as the local user."""
    from mcp.server.stdio import stdio_server

    server = AssistantTools(lambda: client).server()
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())
