"""LangChain tools as first-class tools: `wrap_tool(lc_tool, permission="confirm", timeout=30)`.

Any `BaseTool` works — `@langchain_core.tools.tool` functions, `StructuredTool`s with a pydantic
or JSON-schema `args_schema`, and subclasses with no schema at all. The schema the model sees
is the one LangChain itself would send to OpenAI (`convert_to_openai_tool`), so injected
arguments stay hidden and schema-less tools get theirs from `_run`'s signature. Calls go
through `ainvoke`: async tools run natively, sync ones in LangChain's executor, never on the
event loop. A `ToolException` (or any other exception) becomes a tool error for the model.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .base import Permission, Tool

LANGCHAIN = "langchain"


def is_langchain_tool(obj: Any) -> bool:
    try:
        from langchain_core.tools import BaseTool
    except ImportError:  # pragma: no cover - langchain-core is a dependency
        return False
    return isinstance(obj, BaseTool)


def wrap_tool(
    lc_tool: Any,
    *,
    permission: Permission | str = Permission.AUTO,
    timeout: float | None = None,
    name: str | None = None,
    description: str | None = None,
    max_result_chars: int | None = None,
) -> Tool:
    """Register-ready `Tool` for a LangChain `BaseTool`, with a permission and a timeout.

    `permission="confirm"` makes every call wait for a person's approval; `timeout` (seconds)
    overrides `tools.timeout` from the settings. Export the result from a plugin module, or
    pass it in `extra_tools=`.
    """
    if not is_langchain_tool(lc_tool):
        raise ConfigError(
            f"wrap_tool() needs a LangChain BaseTool (e.g. a @langchain_core.tools.tool "
            f"function); got {type(lc_tool).__name__}"
        )
    if timeout is not None and timeout <= 0:
        raise ConfigError(f"wrap_tool({lc_tool.name!r}): timeout must be positive, got {timeout}")
    from langchain_core.utils.function_calling import convert_to_openai_tool

    try:
        spec = convert_to_openai_tool(lc_tool)["function"]
    except Exception as exc:
        raise ConfigError(
            f"LangChain tool '{lc_tool.name}': cannot build its JSON schema ({exc})"
        ) from exc
    schema = dict(spec.get("parameters") or {})
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})

    async def call(**kwargs: Any) -> Any:
        return await lc_tool.ainvoke(kwargs)

    return Tool(
        name=name or lc_tool.name,
        description=description or spec.get("description") or lc_tool.description or lc_tool.name,
        args_model=None,
        func=call,
        permission=Permission.parse(permission),
        timeout=timeout,
        max_result_chars=max_result_chars,
        input_schema=schema,
        source=LANGCHAIN,
    )
