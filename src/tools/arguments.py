"""Model-written tool arguments into the keyword arguments a tool is called with.

The model sends arguments as a JSON string that may be empty, not JSON, not an object, or
not what the tool's schema asks for. None of that raises: each check answers either the
arguments or a text that tells the model what to fix, which becomes the failed result of
the call. Tools with a pydantic model get its coercions (and defaults); tools with only a
JSON schema (MCP, LangChain) are checked against the schema and get their arguments as sent.

Parsing is lenient only where leniency cannot change what the model meant (`loads_lenient`):
raw control characters inside strings (a newline typed into a string: `strict=False`),
whitespace or a byte-order mark around the object, and a Markdown code fence around it
(small local models wrap the object in a json code fence). Nothing is guessed: a missing brace or
quote is still an error the model is told about.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from .base import Tool

# A Markdown fence opening or closing the whole text (```json ... ```), either one alone too
# (weak models also end with a stray ```json):
# JSON never starts or ends with backticks, so cutting them cannot change a parse.
_OPEN_FENCE = re.compile(r"\A```[A-Za-z0-9_-]*[ \t]*(\r?\n|\Z)")
_CLOSE_FENCE = re.compile(r"(\A|\r?\n|[ \t]*)```[A-Za-z0-9_-]*\Z")  # a stray tag too


def loads_lenient(raw: str) -> Any:
    """`json.loads` with the repairs that cannot change meaning (module docstring).
    Raises `json.JSONDecodeError` like `json.loads` when the text is still not JSON."""
    text = raw.strip().lstrip("\ufeff").strip()
    try:
        return json.loads(text, strict=False)
    except json.JSONDecodeError:
        unfenced = _CLOSE_FENCE.sub("", _OPEN_FENCE.sub("", text, count=1), count=1).strip()
        if unfenced == text:
            raise
    return json.loads(unfenced, strict=False)


def canonical_arguments(raw: str | None) -> str | None:
    """`raw` as strict JSON when it is a JSON object (re-serialized only if a repair was
    needed), else None. What history resends: strict servers refuse malformed arguments."""
    if not raw:
        return None
    try:
        return raw if isinstance(json.loads(raw), dict) else None
    except ValueError:
        pass
    try:
        value = loads_lenient(raw)
    except ValueError:
        return None
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else None


def parse_arguments(
    raw: str | Mapping[str, Any] | None,
) -> tuple[dict[str, Any] | None, str | None]:
    """Raw model arguments → dict, or an error text the model can act on."""
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, Mapping):
        return dict(raw), None
    try:
        value = loads_lenient(raw)
    except json.JSONDecodeError as exc:
        snippet = raw if len(raw) <= 200 else raw[:200] + "…"
        return None, (
            f"arguments are not valid JSON ({exc.msg} at position {exc.pos}): {snippet!r}. "
            "Send the arguments as one JSON object."
        )
    if not isinstance(value, dict):
        return None, "arguments must be a JSON object"
    return value, None


def argument_error(tool: Tool | None, raw: str | Mapping[str, Any] | None) -> str | None:
    """Why `raw` cannot be run by `tool` (not JSON, not an object, not what its schema asks
    for), or None. Checked before anyone is asked to approve a call: a call that can only fail
    goes back to the model as an error instead of to a person."""
    args, error = parse_arguments(raw)
    if error is not None or args is None or tool is None:
        return error
    return validate_arguments(tool, args)[1]


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
