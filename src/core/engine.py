"""Open the run engine of a process: the services from settings (agents, models, tools,
stores), the checkpoint saver, the chat graph (compiled once) and the run `Runtime`.

`Engine` is what the layers above build on (the public `Client`, the old
`Client`, the replay sandbox). What belongs to a layer above is handed in, never
imported: the model wrapper (the request recorder of `replay/`) and the graph providers (the
workflow engine).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from ..agents.model import Model, ModelPicker, ModelRegistry
from ..agents.spec import load_agents
from ..errors import ConfigError
from ..hooks.dedupe import StoreHookLedger
from ..hooks.loader import build_runner
from ..settings import Settings, load_settings, packaged_config_dir
from ..tools.mcp.manager import is_mcp_name, start_mcp_servers
from ..tools.registry import ToolRegistry
from .checkpoints import CheckpointStore
from .context import Services
from .conversations import ACTIVE_BRANCH, ConversationManager
from .graph import build_graph
from .run import cancel as run_cancel
from .run import workers
from .run.endings import Spare, settle_on_open
from .run.ownership import guard_saver
from .run.resume import resume_start
from .run.runtime import GraphProvider, Runtime
from .run.shutdown import stop_runs
from .run.start import start_message
from .run.upkeep import QuietUpkeep
from .store.repository import AppStore

ModelWrap = Callable[[Model], Model]

log = logging.getLogger("artifactflow")


async def _nothing() -> None:
    return None


def builtin_tools() -> list[Any]:
    from ..tools.builtin.artifacts import ARTIFACT_TOOLS
    from ..tools.builtin.handoff import handoff
    from ..tools.builtin.knowledge import KNOWLEDGE_TOOLS
    from ..tools.builtin.memory import MEMORY_TOOLS
    from ..tools.builtin.subagent import call_subagent
    from ..tools.builtin.web_tools import WEB_TOOLS

    return [call_subagent, handoff, *ARTIFACT_TOOLS, *WEB_TOOLS, *MEMORY_TOOLS, *KNOWLEDGE_TOOLS]


def build_registry(settings: Settings, extra_tools: list[Any] | None = None) -> ToolRegistry:
    """Built-ins, then tools from installed packages (entry points), `extra_tools`, and the
    config's `plugins:` — a later tool of the same name replaces an earlier one."""
    registry = ToolRegistry(builtin_tools())
    registry.load_entry_points()
    for item in extra_tools or ():
        registry.register(item, replace=True)
    registry.load_plugins(settings.plugins, settings.config_dir)
    # MCP tools are checked once their servers have started (open_engine).
    unknown = [n for n in settings.permissions if n not in registry and not is_mcp_name(n, settings)]
    if unknown:
        raise ConfigError(
            f"{settings.config_dir / 'artifactflow.yaml'}: field 'permissions': unknown tool(s) "
            f"{', '.join(unknown)}; known tools: {', '.join(registry.names())}"
        )
    registry.set_permissions(settings.permissions)
    return registry


def load_agent_specs(settings: Settings, registry: ToolRegistry) -> dict[str, Any]:
    folder = settings.config_dir / "agents"
    if not folder.is_dir():
        folder = packaged_config_dir() / "agents"
    agents = load_agents(folder)
    for name, spec in agents.items():
        tools, missing = registry.expand(spec.tools)  # SERVER__* wildcards
        if missing:
            raise ConfigError(
                f"{spec.source}: field 'tools': unknown tool(s) {', '.join(missing)}; "
                f"available: {', '.join(registry.names())}"
            )
        agents[name] = spec.model_copy(update={"tools": tuple(tools)})
    return agents


async def open_engine(
    settings: Settings | None = None,
    *,
    extra_tools: list[Any] | None = None,
    hooks: Sequence[Any] = (),
    model_wrap: ModelWrap | None = None,
    **overrides: Any,
) -> tuple[Services, CheckpointStore]:
    """The services and checkpoint saver from settings; `model_wrap` goes around every model
    (the request recorder, when the opener records)."""
    settings = settings or load_settings(**overrides)
    registry = build_registry(settings, extra_tools)
    runner = build_runner(settings, extra=hooks)  # a bad `hooks:` entry fails before anything starts
    models = ModelRegistry.from_file(settings.config_dir / "models.yaml", default_model=settings.model)
    await start_mcp_servers(settings, registry)  # stopped by registry.aclose()
    try:
        agents = load_agent_specs(settings, registry)
    except BaseException:
        await registry.aclose()
        raise
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    url = settings.database_url
    pg = {"pool_size": settings.database_pool_size, "synchronous_commit": settings.database_synchronous_commit}
    store = await AppStore.open(url, sqlite_path=settings.app_db_path, **pg)
    try:
        if url and url.startswith(("postgres", "postgresql")):
            checkpoints = await CheckpointStore.open_postgres(url, **pg)
        else:
            checkpoints = await CheckpointStore.open_sqlite(settings.checkpoint_db_path)
    except Exception:
        await store.close()
        raise
    services = Services(
        settings=settings,
        agents=agents,
        models=models,
        tools=registry,
        llm=ModelPicker(settings.llm, wrap=model_wrap),
        store=store,
        hooks=runner,
    )
    runner.ledger = StoreHookLedger(store)
    return services, checkpoints


_FROZEN: list[bool] = []  # the process's objects were frozen once (`freeze_startup_objects`)


def freeze_startup_objects() -> None:
    """Once per process, at the first engine's opening: collect, then move every object alive
    (the imported libraries, compiled graphs, schemas: ~200k objects that live as long as the
    process) out of the cyclic garbage collector's reach (`gc.freeze`). Under load a full
    collection re-walked them all, about 120 ms each, 8 % of the CPU of 100 conversations at
    once. Objects freed by their reference count are freed as before; only cycles among these
    never become garbage in practice. `ARTIFACTFLOW_GC_FREEZE=0` leaves the collector as is,
    as does a process that turned it off."""
    if _FROZEN or not gc.isenabled() or os.environ.get("ARTIFACTFLOW_GC_FREEZE", "1") == "0":
        return
    _FROZEN.append(True)
    gc.collect()
    gc.freeze()


class Engine:
    """One process's open run engine.

    `start`, `resume`, `cancel` and `wait` are the engine's run operations; reading events is
    `run.follow`. Close it with `aclose` (runs in flight are cancelled and stay resumable).
    """

    def __init__(
        self, services: Services, checkpoints: CheckpointStore, graphs: Sequence[GraphProvider] = ()
    ) -> None:
        self.services = services
        self.checkpoints = checkpoints
        self.store = services.store
        self.conversations = ConversationManager(services.store)
        self.graph = build_graph(guard_saver(checkpoints.saver))  # a stale run writes none
        self.rt = Runtime(services, checkpoints, self.graph, graph_providers=list(graphs))
        self.rt.upkeep = QuietUpkeep(checkpoints, services.store, self.rt.runs)
        self.workers: workers.Workers | None = None

    @classmethod
    async def open(
        cls, settings: Settings | None = None, *, graphs: Sequence[GraphProvider] = (), **options: Any
    ) -> Engine:
        """`open_engine(settings, **options)` (its keywords and the setting overrides), then join
        the workers (bus, recovery); `graphs` hand the engine the graphs it runs besides its own."""
        services, checkpoints = await open_engine(settings, **options)
        engine = cls(services, checkpoints, graphs)
        try:
            engine.rt.spare = Spare(services.settings.data_dir, sqlite=services.store.is_sqlite)
            await settle_on_open(engine.rt)
            engine.workers = await workers.start(engine.rt)
        except BaseException:
            await engine.aclose()
            raise
        if not _FROZEN:
            services.prepare_models()  # their modules are long-lived too: frozen with the rest
        freeze_startup_objects()
        return engine

    def use_store(self, store: Any) -> None:
        """Compile the chat graph with `store` (a LangGraph `BaseStore`, e.g. the long-term
        memory of `artifactflow.memory`), so its nodes reach it with `get_store()`; the engine
        takes it as a parameter and knows nothing of what it is."""
        self.graph = self.graph.copy(update={"store": store})
        self.rt.graph = self.graph

    async def aclose(self, *, cancel_running: bool = True) -> None:
        """Stop background runs (they stay resumable from their checkpoints) and close. Every
        part is closed even when another fails (a full disk, a database away): a failure is
        logged, never left holding a connection thread that keeps the process alive."""
        try:
            await stop_runs(self.rt, cancel_running=cancel_running)
        finally:
            steps: list[tuple[str, Callable[[], Any]]] = [
                ("workers", self.workers.stop if self.workers is not None else _nothing),
                ("model clients", self.services.llm.aclose),
                ("tools", self.services.tools.aclose),  # stops MCP servers
                ("hooks", self.services.hooks.aclose),  # ends open spans, flushes exporters
                ("storage upkeep", self.rt.upkeep.close if self.rt.upkeep is not None else _nothing),
                ("checkpoints", self.checkpoints.close),
                ("store", self.store.close),
            ]
            for name, step in steps:
                try:
                    await step()
                except Exception:
                    log.warning("closing the engine: %s failed to close", name, exc_info=True)

    async def start(
        self,
        content: str,
        conversation_id: str | None = None,
        parent_message_id: Any = ACTIVE_BRANCH,
        *,
        user_id: str | None = None,
        project: str | None = None,
        services: Services | None = None,
        message_id: str | None = None,
    ) -> dict[str, Any]:
        """Create the message and start its run in the background; return its ids.
        `services`, `message_id`: see `start_message`."""
        return await start_message(
            self.rt, self.conversations, content, conversation_id, parent_message_id,
            user_id=user_id, project=project, services=services, message_id=message_id,
        )

    async def resume(self, message_id: str, decisions: Any) -> None:
        """Validate `decisions`, claim the paused message and start the resumed run (or
        recover a run whose process died)."""
        await resume_start(self.rt, message_id, decisions)

    async def cancel(self, message_id: str) -> bool:
        """Stop a running message at the next safe point, or close a paused one. A run owned
        by another worker (PostgreSQL) is asked to stop, and this waits until it has. False if
        the message is neither running nor paused (`core/run/cancel.py`: once accepted, a
        cancel is never lost, and this waits at most a couple of seconds)."""
        return (await run_cancel.cancel(self.rt, message_id)).cancelled

    async def wait(self, message_id: str) -> None:
        """Wait until the message's run in this process (if any) has finished its segment."""
        handle = self.rt.runs.get(message_id)
        if handle and handle.task:
            with contextlib.suppress(BaseException):
                await asyncio.shield(handle.task)
