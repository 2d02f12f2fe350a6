"""`artifactflow demo`: the web page with a scripted model, offline and without a key.

A newcomer can try the page (the chat, the current step in the answer's bubble, the timeline,
a subagent, an artifact, Markdown streaming in) before choosing a model. The model is the
in-process `ScriptedModel` with a function of the request: the lead asks its first subagent,
writes a notes artifact, then answers in Markdown; a subagent answers at once. It never
searches or fetches anything, so it works with no network. Its text is streamed in small
pieces with a short pause between them, so the page can be watched while it works. The data
goes to `demo/` inside the data folder unless `--data-dir` is given: demo conversations never
mix with real ones.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .app import check_config_files, command
from .commands_admin import check_port_free
from .options import GLOBALS

if TYPE_CHECKING:
    from ..agents.model import ModelRequest, ModelResponse
    from ..agents.model.base import DeltaCallback
    from ..settings import Settings

CHUNK_PAUSE = 0.03  # seconds between streamed pieces: visible streaming, a short demo


@command()
def demo(
    host: Annotated[str, typer.Option("--host", help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port to listen on.")
    ] = 8000,
) -> None:
    """Serve the web page with a scripted model: try it offline, without a key (exit 7 when
    the port is in use)."""
    check_port_free(host, port)
    from ..api.app import create_app, server_for
    from ..client import Client

    settings = demo_settings()
    agents = check_config_files(settings)
    lead = next(spec for spec in agents.values() if spec.role == "lead")
    subagents = [n for n, spec in agents.items() if spec.role == "subagent"]
    if lead.subagents is not None:
        subagents = [n for n in lead.subagents if n in subagents]
    if "call_subagent" not in lead.tools:
        subagents = []

    async def open_client() -> Client:
        return await Client.open(settings, model=DemoModel(lead.name, subagents))

    typer.echo(f"artifactflow demo: http://{host}:{port}/ (a scripted model; data in {settings.data_dir})")
    server_for(create_app(open_client, host=host), host, port).run()


def demo_settings() -> Settings:
    settings = GLOBALS.settings()
    if GLOBALS.data_dir is None:  # not given: a folder of its own inside the data folder
        settings = settings.model_copy(update={"data_dir": settings.data_dir / "demo"})
    return settings


class DemoModel:
    """A `Model` that plays a small research run for any question (module docstring)."""

    api = "scripted"

    def __init__(self, lead: str, subagents: list[str]) -> None:
        from ..agents.model import ScriptedModel

        self._model = ScriptedModel(function=self._reply, chunk_size=6, model_name="demo")
        self._notes = itertools.count(1)
        self.lead, self.subagents = lead, subagents

    async def aclose(self) -> None:
        await self._model.aclose()

    async def complete(
        self, request: ModelRequest, on_delta: DeltaCallback | None = None
    ) -> ModelResponse:
        import asyncio

        async def slowly(text: str) -> None:
            await asyncio.sleep(CHUNK_PAUSE)
            if on_delta is not None:
                result = on_delta(text)
                if asyncio.iscoroutine(result):
                    await result

        return await self._model.complete(request, slowly if on_delta is not None else None)

    def _reply(self, request: ModelRequest) -> Any:
        from ..agents.model import Reply, ToolCall

        messages = request.messages
        task = next(
            (str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), ""
        )
        if request.agent != self.lead:  # a subagent: findings at once, no tools
            return Reply(
                f"**Findings** for: {task[:120]}\n\n- A first point worth knowing.\n"
                "- A second one, with its source.\n\n(The demo model answers without "
                "searching: configure a model and a search provider for real answers.)"
            )
        offered = {t.get("function", {}).get("name") for t in request.tools or []}
        done = [m for m in messages if m.get("role") == "tool"]
        names = {
            c.get("function", {}).get("name") for m in messages for c in (m.get("tool_calls") or [])
        }
        if "call_subagent" in offered and self.subagents and not done:
            return Reply(
                "I will ask a subagent first.",
                tool_calls=[ToolCall("call_subagent", {
                    "agent_name": self.subagents[0], "instruction": f"Research: {task[:200]}",
                })],
            )
        if "create_artifact" in offered and "create_artifact" not in names:
            number = next(self._notes)
            return Reply(tool_calls=[ToolCall("create_artifact", {
                "id": f"demo_notes_{number}", "title": "Demo notes",
                "content": f"# Notes\n\n## The question\n{task[:300]}\n\n## Findings\n"
                           "- A first point worth knowing.\n- A second one, with its source.\n",
            })])
        return Reply(
            f"## Answer\n\nYou asked: *{task[:200]}*\n\n"
            "1. A subagent researched it (see the **timeline**).\n"
            "2. The notes are in the **artifacts** panel.\n\n"
            "This is the **demo** model: set `OPENAI_API_KEY` (and `OPENAI_BASE_URL` for a local "
            "server), then `artifactflow serve` for real answers."
        )
