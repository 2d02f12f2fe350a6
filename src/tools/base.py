"""Tool primitives: the result type, permission levels and the tool object.

A tool's failure is data for the model, not a crash: every path through a tool ends in a
`ToolResult`, and the tool node turns it into the text the model sees.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ..settings.permissions import Permission
from ..shapes import JsonObject, ToolResultDict

__all__ = ["Permission", "Tool", "ToolResult"]


@dataclass
class ToolResult:
    """Outcome of one tool call. `data` must be JSON-serialisable."""

    success: bool
    data: Any = None
    error: str | None = None
    metadata: JsonObject = field(default_factory=dict)  # open flags: denied, outcome, …

    def to_dict(self) -> ToolResultDict:
        return {
            "success": self.success,
            "data": self.data,
            "error": self.error,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ToolResult:
        return cls(
            success=bool(raw.get("success")),
            data=raw.get("data"),
            error=raw.get("error"),
            metadata=dict(raw.get("metadata") or {}),
        )

    @classmethod
    def fail(cls, error: str, **metadata: Any) -> ToolResult:
        return cls(success=False, error=error, metadata=metadata)

    @classmethod
    def unknown(cls, text: str, outcome: str, **metadata: Any) -> ToolResult:
        """A call whose effect nobody can know yet: it is still running where we cannot stop
        it (a sync tool's thread) after we stopped waiting (`timed_out`, `abandoned`)."""
        return cls(
            success=False,
            error=text,
            metadata={"outcome": outcome, "may_still_take_effect": True, **metadata},
        )

    @property
    def outcome(self) -> str:
        """`completed`, `failed`, or what else happened (`timed_out`, `abandoned`, …)."""
        if self.metadata.get("outcome"):
            return str(self.metadata["outcome"])
        if self.metadata.get("interrupted"):  # the tool node's "a crash cut it short"
            return "interrupted"
        return "completed" if self.success else "failed"

    @property
    def may_still_take_effect(self) -> bool:
        """True while the call may still change the world (it is running out of our reach)."""
        return bool(self.metadata.get("may_still_take_effect"))

    def model_text(self) -> str:
        """The text the model sees for this result (before the size cap)."""
        if self.may_still_take_effect:
            return f"UNKNOWN: {self.error}"
        if not self.success:
            return f"ERROR: {self.error or 'tool failed'}"
        if isinstance(self.data, str):
            return self.data
        return json.dumps(self.data, ensure_ascii=False, default=str)


ToolFunc = Callable[..., Any] | Callable[..., Awaitable[Any]]
SerialKey = str | Callable[[JsonObject], "str | None"]  # a function of the call's arguments


@dataclass
class Tool:
    """A callable the model may invoke, with its argument model and permission level.

    `invoke` receives validated arguments as a dict plus, when the function asks for it, the
    per-call `ToolContext` (conversation id, store, settings). Tools described elsewhere (MCP
    servers, LangChain) carry a ready JSON schema in `input_schema` and no `args_model`.
    """

    name: str
    description: str
    args_model: type[BaseModel] | None
    func: ToolFunc
    permission: Permission = Permission.AUTO
    timeout: float | None = None
    is_async: bool = True
    context_param: str | None = None
    max_result_chars: int | None = None
    # False: a cancelled run lets this tool finish (its side effect completes) before stopping.
    cancellable: bool = True
    # True: running it twice does no harm, so it may be run again after a crash or a timeout.
    # False (default): at most once; a call whose effect is unknown is never repeated for it.
    idempotent: bool = False
    input_schema: JsonObject | None = None  # JSON Schema
    # Where the tool comes from (builtin, plugin, langchain, mcp:SERVER); "" = ask the registry.
    source: str = ""
    # Calls whose keys are equal never run at the same time: within one round they run one
    # after another in call order. A template formatted with the call's arguments
    # ("artifact:{id}") or a function of them; None: the call runs concurrently with any.
    serial_key: SerialKey | None = None

    def serial_key_for(self, args: Mapping[str, Any]) -> str | None:
        """This call's resource key. A template naming an argument the call lacks, or a key
        function that fails, gives the template (or the tool's name): serial, to be safe."""
        key = self.serial_key
        if key is None:
            return None
        if callable(key):
            try:
                value = key(dict(args))
            except Exception:
                return f"tool:{self.name}"
            return None if value is None else str(value)
        try:
            return key.format_map(dict(args))
        except (KeyError, IndexError, ValueError, AttributeError):
            return key

    def json_schema(self) -> JsonObject:
        if self.input_schema is not None or self.args_model is None:
            return copy.deepcopy(self.input_schema or {"type": "object", "properties": {}})
        cached = self.__dict__.get("_schema")
        if cached is None or cached[0] is not self.args_model:  # pydantic builds it slowly
            schema = self.args_model.model_json_schema()
            schema.pop("title", None)
            cached = self.__dict__["_schema"] = (self.args_model, schema)
        return copy.deepcopy(cached[1])

    def openai_spec(self) -> JsonObject:  # what `ModelRequest.tools` holds
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.json_schema(),
            },
        }
