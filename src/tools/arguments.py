"""Model-written tool arguments into the keyword arguments a tool is called with.

The model sends arguments as a JSON string that may be empty, not JSON, not an object, or
not what the tool's schema asks for. None of that raises: each check answers either the
arguments or a text that tells the model what to fix, which becomes the failed result of
the call. Tools with a pydantic model get its coercions (and defaults); tools with only a
JSON schema (MCP, LangChain) are checked against the schema and get their arguments as sent.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from .base import Tool


def parse_arguments(
    raw: str | Mapping[str, Any] | None,
) -> tuple[dict[str, Any] | None, str | None]:
    """Raw model arguments → dict, or an error text the model can act on."""
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, Mapping):
        return dict(raw), None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        snippet = raw if len(raw) <= 200 else raw[:200] + "…"
        return None, (
            f"arguments are not valid JSON ({exc.msg} at position {exc.pos}): {snippet!r}. "
            "Send the arguments as one JSON object."
        )
    if not isinstance(value, dict):
        return None, "arguments must be a JSON object"
    return value, None


def validate_arguments(
    tool: Tool, args: Mapping[str, Any]
) -> tuple[dict[str, Any] | None, str | None]:
    if tool.args_model is None:
        return _validate_json_schema(tool, args)
    try:
        model = tool.args_model.model_validate(dict(args))
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
        return None, f"invalid arguments for '{tool.name}': {problems}"
    return {name: getattr(model, name) for name in type(model).model_fields}, None


def _validate_json_schema(
    tool: Tool, args: Mapping[str, Any]
) -> tuple[dict[str, Any] | None, str | None]:
    """Check arguments against a ready JSON schema; the arguments pass through unchanged."""
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import validator_for

    schema = tool.json_schema()
    try:
        validator = validator_for(schema)(schema)
        errors = sorted(validator.iter_errors(dict(args)), key=lambda e: list(e.path))
    except SchemaError:  # the server's schema is broken: let it judge
        return dict(args), None
    if not errors:
        return dict(args), None
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e.path) or 'arguments'}: {e.message}" for e in errors[:5]
    )
    return None, f"invalid arguments for '{tool.name}': {problems}"
