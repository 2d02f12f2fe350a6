"""Per-request objects handed to the graph as LangGraph runtime context.

The graph is compiled once per process; nothing request-specific is captured in closures.
`RunContext` carries the run's ids (and the segment's `RunInfo` for hooks) and a handle on the
process-wide `Services` (settings, agents, tools, the models, the app store, the hooks).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..hooks.dispatch import HookRunner

if TYPE_CHECKING:
    from ..agents.model import Model, ModelPicker, ModelRegistry, ResolvedModel
    from ..agents.spec import AgentSpec
    from ..events.envelope import Emitted, Event
    from ..hooks.types import RunInfo
    from ..settings import Settings
    from ..tools.registry import ToolRegistry
    from .recall import Recaller
    from .store.repository import AppStore


@dataclass
class Services:
    """Process-wide collaborators shared by every run.

    `models` resolves an agent's `model:` to a profile (endpoint, key, model name, API);
    `llm` picks the `Model` that serves that profile's API. Nodes call `model_for(spec)`.
    """

    settings: Settings
    agents: dict[str, AgentSpec]
    models: ModelRegistry
    tools: ToolRegistry
    llm: ModelPicker
    store: AppStore
    extras: dict[str, Any] = field(default_factory=dict)
    hooks: HookRunner = field(default_factory=HookRunner)  # lifecycle hooks, in order
    # Recall before the model call (core/recall.py), handed in by the facade when
    # `memory.recall` or knowledge injection is on; None: no recall.
    recaller: Recaller | None = None

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

    def model_for(self, spec: AgentSpec) -> tuple[Model, ResolvedModel]:
        """The model that serves `spec`, and the profile it resolved to (with
        `context.default_window` as its window when the profile declares none, so the
        default output bound leaves the prompt room in it)."""
        target = self.resolve(spec.model)
        return self.llm.for_target(target), target

    def resolve(self, reference: str | None) -> ResolvedModel:
        target = self.models.resolve(reference)
        if target.context_window is None:
            target = dataclasses.replace(target, context_window=self.settings.context.default_window)
        return target

    def prepare_models(self) -> None:
        """Build the model of every agent's profile now (`ModelPicker.prepare`); a profile
        that does not resolve is left for its run to report, as before."""
        targets = []
        for spec in self.agents.values():
            try:
                targets.append(self.resolve(spec.model))
            except Exception:  # noqa: BLE001  # reported by the run that uses it
                continue
        self.llm.prepare(targets)

    def use_model(self, model: Model) -> None:
        """Serve every agent with `model` (e.g. a `ScriptedModel` in tests); API keys are no
        longer required, since none is sent."""
        self.llm.fixed = model
        self.models.credentials_required = False


@dataclass
class RunContext:
    services: Services
    conversation_id: str
    message_id: str
    run: RunInfo | None = None  # the segment, as hooks see it
    # The message's first segment, just stored by this process: nothing of it is stored yet
    # but the user message (no events, spending or recorded model calls to read back).
    fresh: bool = False
    # Per-segment context-window state (token counters by invocation; see core/agent_window).
    window: dict[str, Any] = field(default_factory=dict)
    # The segment's events already stored, in order (the live run's list, appended as the
    # event sink commits them), and a wait until every event emitted so far is among them: the
    # request recorder refers to stored tool results instead of copying them
    # (replay/result_refs.py). Read-only here.
    stored_events: Sequence[Event] = ()
    settle_events: Callable[[], Awaitable[None]] | None = None
    # Model calls cut off by a cancel (a run's or a losing workflow branch's): their
    # `llm_complete` with estimated usage, as `Emitted`, for the segment to store before the
    # run ends, so their tokens count in the totals (`agent_nodes._llm_step`).
    cut_off_calls: list[Emitted] = field(default_factory=list)
    # The request recorder's state for this segment's message (replay/recording.py), kept
    # here so that it lives exactly as long as the segment. Opaque to the engine.
    recording: Any = None
    # Set by the recorder while a recorded call's row is on its way to the store (it joins the
    # transaction of the events emitted after the call); the segment awaits it before its
    # final status, so a finished run's recorded calls are all stored. Never raises.
    settle_recording: Callable[[], Awaitable[None]] | None = None
    # The segment's own relay of node events (`Segment.relay_now`), set for the chat graph:
    # nodes hand their events straight to it instead of LangGraph's custom stream (which
    # crosses the event loop with `call_soon_threadsafe`, a self-pipe write per event). The
    # order is the same: one loop, and every writer of the run goes this way. None: the stream.
    emit_now: Callable[[Emitted], None] | None = None
