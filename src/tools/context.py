"""What a tool may learn about the call it serves.

A tool that declares a parameter of type `ToolContext` receives one; the model never sees it.
`services` carries per-run objects (the artifact store, settings) without the tool module
importing the engine.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ToolContext:
    conversation_id: str
    message_id: str
    agent: str
    tool_call_id: str
    services: dict[str, Any] = field(default_factory=dict)
    emit: Any = None  # callable(payload) for tool-produced events (artifact changes: ArtifactCreatedData, ...)

    def service(self, name: str) -> Any:
        try:
            return self.services[name]
        except KeyError:
            raise RuntimeError(f"service '{name}' is not available to tools in this run") from None
