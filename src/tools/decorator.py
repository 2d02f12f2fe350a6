"""`@tool`: a typed Python function becomes a tool with a JSON schema.

Signature + type hints + docstring → a pydantic model → JSON schema. The first docstring
paragraph is the description; an `Args:` section (Google style) describes the parameters.
A parameter annotated `ToolContext` is injected at call time and hidden from the model.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Any, TypedDict, Unpack, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, create_model

from .base import Permission, SerialKey, Tool, ToolFunc
from .context import ToolContext

_ARG_LINE = re.compile(r"^\s{0,8}(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


def _parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    if not doc:
        return "", {}
    doc = inspect.cleandoc(doc)
    parts = re.split(r"\n\s*(?:Args|Arguments|Parameters)\s*:\s*\n", doc, maxsplit=1)
    summary = parts[0].strip()
    descriptions: dict[str, str] = {}
    if len(parts) == 2:
        current: str | None = None
        for line in parts[1].splitlines():
            if re.match(r"^\s*(Returns|Raises|Yields|Examples?)\s*:", line):
                break
            match = _ARG_LINE.match(line)
            if match and not line.startswith(" " * 9):
                name: str = match.group(1).lstrip("*")
                descriptions[name] = match.group(2).strip()
                current = name
            elif current and line.strip():
                descriptions[current] += " " + line.strip()
    return summary, descriptions


def build_args_model(func: Callable[..., Any], name: str) -> tuple[type[BaseModel], str | None]:
    """Return the argument model and the name of the `ToolContext` parameter, if any."""
    signature = inspect.signature(func)
    # with the `Annotated` extras: a tool declares checks beyond its types there (a non-empty
    # list, `Field(min_length=1)`), and they run before a person is asked (`tools.arguments`)
    hints = get_type_hints(func, include_extras=True)
    _, docs = _parse_docstring(func.__doc__)
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for param in signature.parameters.values():
        annotation = hints.get(param.name, Any)
        if annotation is ToolContext:
            context_param = param.name
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"tool '{name}': *args and **kwargs are not supported")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (annotation, Field(default, description=docs.get(param.name)))
    model = create_model(  # type: ignore[call-overload]
        f"{name}_args", __config__=ConfigDict(extra="forbid"), **fields
    )
    return model, context_param


class ToolOptions(TypedDict, total=False):
    """`@tool(...)`'s options; their defaults are `make_tool`'s."""

    name: str | None
    description: str | None
    permission: Permission | str
    timeout: float | None
    max_result_chars: int | None
    cancellable: bool
    serial_key: SerialKey | None
    idempotent: bool


def make_tool(
    func: ToolFunc,
    *,
    name: str | None = None,
    description: str | None = None,
    permission: Permission | str = Permission.AUTO,
    timeout: float | None = None,
    max_result_chars: int | None = None,
    cancellable: bool = True,
    serial_key: SerialKey | None = None,
    idempotent: bool = False,
) -> Tool:
    tool_name = name or func.__name__
    summary, _ = _parse_docstring(func.__doc__)
    args_model, context_param = build_args_model(func, tool_name)
    return Tool(
        name=tool_name,
        description=description or summary or tool_name,
        args_model=args_model,
        func=func,
        permission=Permission.parse(permission),
        timeout=timeout,
        is_async=inspect.iscoroutinefunction(func),
        context_param=context_param,
        max_result_chars=max_result_chars,
        cancellable=cancellable,
        serial_key=serial_key,
        idempotent=idempotent,
    )


@overload
def tool(func: ToolFunc, /) -> Tool: ...


@overload
def tool(**options: Unpack[ToolOptions]) -> Callable[[ToolFunc], Tool]: ...


def tool(
    func: ToolFunc | None = None, /, **options: Unpack[ToolOptions]
) -> Tool | Callable[[ToolFunc], Tool]:
    """Turn a typed function into a `Tool`: `@tool` or `@tool(permission="confirm")`.

    `serial_key="artifact:{id}"` (formatted with the call's arguments, or a function of them)
    keeps calls on the same resource from running at the same time: within one response they
    run one after another, in call order. `idempotent=True` says running it twice does no
    harm: it is run again after a crash or a timeout. By default a call runs at most once
    (see `tools.background`)."""

    def wrap(f: ToolFunc) -> Tool:
        return make_tool(f, **options)

    if func is not None:
        return wrap(func)
    return wrap
