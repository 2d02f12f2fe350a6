"""Per-request objects handed to the graph as LangGraph runtime context.

The graph is compiled once per process; nothing request-specific is captured in closures.
`RunContext` carries the run's ids and a handle on the process-wide `Services` (settings,
agents, tools, the LLM client, the app store).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..agents.llm import LLMClient
    from ..agents.models import ModelRegistry
    from ..agents.spec import AgentSpec
    from ..settings import Settings
    from ..tools.registry import ToolRegistry
    from .store.repository import AppStore


@dataclass
class Services:
    """Process-wide collaborators shared by every run."""

    settings: Settings
    agents: dict[str, AgentSpec]
    models: ModelRegistry
    tools: ToolRegistry
    llm: LLMClient
    store: AppStore
    extras: dict[str, Any] = field(default_factory=dict)

    @property
    def lead(self) -> AgentSpec:
        return next(a for a in self.agents.values() if a.role == "lead")

    def subagents_for(self, lead: AgentSpec) -> list[AgentSpec]:
        names = lead.subagents
        return [
            a
            for a in self.agents.values()
            if a.role == "subagent" and (names is None or a.name in names)
        ]


@dataclass
class RunContext:
    services: Services
    conversation_id: str
    message_id: str
    cancel_event: asyncio.Event = field(default_factory=asyncio.Event)
