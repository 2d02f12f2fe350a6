"""`Client`: the public facade, grouped by noun.

```python
async with await Client.open() as client:
    run = await client.runs.start("Write a haiku")
    async for event in run: ...
    result = await run.result()
```
`open` builds the engine (`core/engine.py`) and plugs in what sits above it: the request
recorder around every model (`replay/recording.py`), the workflow graphs
(`workflows/launch.py`) and long-term memory (`memory/`: the `memory_*` tools, their
`memory` service and the graph's `BaseStore`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..agents.model import Model
from ..core.engine import Engine
from ..core.run.data import StoredData
from ..memory import MemoryStore
from ..memory.tools import MemoryTools
from ..memory.vector_file import VECTOR_DIR
from ..memory.wiring import plug_memory
from ..replay.recording import recording
from ..settings import Settings
from ..workflows.launch import WorkflowGraphs
from .agent_config import RunConfigs
from .knowledge import Knowledge
from .memories import Memories
from .nouns import Admin, Conversations, Runs, Workflows
from .requests import Request
from .run import RunResult
from .stored import Artifacts


class Client:
    """One process's way in: `runs`, `conversations`, `artifacts`, `workflows`, `memories`,
    `knowledge`, `admin`, and
    `run(request)` for a run's result in one call."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        # a run started with an agent configuration resumes with it, in any process
        engine.rt.services_providers.append(RunConfigs(engine.store))
        data = StoredData(engine.rt, engine.conversations)
        self.runs = Runs(engine, data)
        self.conversations = Conversations(engine, data)
        self.artifacts = Artifacts(data)
        self.workflows = Workflows(engine, data)
        self.admin = Admin(engine, data)
        self.memories = Memories(engine.services.extras["memory"].store)
        self.knowledge = Knowledge(engine)

    @classmethod
    async def open(
        cls,
        settings: Settings | None = None,
        *,
        extra_tools: list[Any] | None = None,
        hooks: Sequence[Any] = (),
        model: Model | None = None,
        **overrides: Any,
    ) -> Client:
        """Build everything from settings (default: `load_settings(**overrides)`);
        `extra_tools` are registered next to the built-ins and plugins; `hooks` (objects with
        hook methods, see `artifactflow.hooks`) run after those named in the config's
        `hooks:`; `model` (a `Model`, e.g. `ScriptedModel`) answers for every agent instead of
        the configured endpoints, so no API key is needed."""
        engine = await Engine.open(
            settings, extra_tools=extra_tools, hooks=hooks, model_wrap=recording,
            graphs=[WorkflowGraphs()], **overrides,
        )
        memory = MemoryStore(engine.services.store, engine.services.settings.memory,
                             vector_dir=engine.services.settings.data_dir / VECTOR_DIR)
        engine.services.extras["memory"] = MemoryTools(memory)  # the memory tools' service
        engine.use_store(memory)  # and the graph's `get_store()`
        plug_memory(engine.services)  # recall before the model call, the artifact indexer
        if model is not None:
            engine.services.use_model(model)
        return cls(engine)

    @property
    def settings(self) -> Settings:
        return self._engine.services.settings

    async def run(self, request: str | Request, *, user_id: str | None = None) -> RunResult:
        """Start `request` and return its result (at its end, or its pause); the run is
        cancelled if this call is."""
        async with await self.runs.start(request, user_id=user_id) as run:
            return await run.result()

    async def aclose(self, *, cancel_running: bool = True) -> None:
        """Stop background runs (they stay resumable from their checkpoints) and close."""
        try:
            await self._engine.aclose(cancel_running=cancel_running)
        finally:
            await self.memories.store.aclose()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
