"""Assemble the process-wide services from settings: agents, models, tools, stores."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..agents.model import ModelPicker, ModelRegistry
from ..agents.spec import load_agents
from ..errors import ConfigError
from ..hooks.dedupe import StoreHookLedger
from ..hooks.loader import build_runner
from ..replay.recording import recording
from ..settings import Settings, load_settings, packaged_config_dir
from ..tools.mcp.manager import is_mcp_name, start_mcp_servers
from ..tools.registry import ToolRegistry
from .checkpoints import CheckpointStore
from .context import Services
from .store.repository import AppStore


def builtin_tools() -> list[Any]:
    from ..tools.builtin.artifacts import ARTIFACT_TOOLS
    from ..tools.builtin.handoff import handoff
    from ..tools.builtin.subagent import call_subagent
    from ..tools.builtin.web_tools import WEB_TOOLS

    return [call_subagent, handoff, *ARTIFACT_TOOLS, *WEB_TOOLS]


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
    **overrides: Any,
) -> tuple[Services, CheckpointStore]:
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
        llm=ModelPicker(settings.llm, wrap=recording),
        store=store,
        hooks=runner,
    )
    runner.ledger = StoreHookLedger(store)
    return services, checkpoints
