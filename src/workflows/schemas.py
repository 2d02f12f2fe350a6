"""JSON Schema helpers: checking schemas, validating values, reading a model's JSON answer,
following a reference path (`output.category`) into a schema, and the schema part of a step's
prompt with the check of its answer (shared by agent and group steps).

Validation uses `jsonschema` (the reference implementation, also used for tool arguments; a
step's answer is one small document, so a compiled validator would buy nothing worth its 15 MB).
"""

from __future__ import annotations

import json
import re
from typing import Any

from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

from ..shapes import JsonObject  # JSON Schema: open by nature

_FENCE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n(.*?)\n?```\s*$", re.DOTALL)


def schema_problem(schema: Any) -> str | None:
    """Why `schema` is not a usable JSON Schema, or None."""
    if not isinstance(schema, dict):
        return "a JSON Schema must be a mapping"
    try:
        validator_for(schema).check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path)
        return "not a valid JSON Schema: " + exc.message + (f" (at {where})" if where else "")
    except Exception as exc:  # unresolvable $ref and the like
        return f"not a valid JSON Schema: {exc}"
    return None


def problems(schema: JsonObject, value: Any, limit: int = 5) -> list[str]:
    """Validation errors of `value` against `schema`, each with where it is."""
    out: list[str] = []
    try:
        errors = sorted(
            validator_for(schema)(schema).iter_errors(value), key=lambda e: [str(p) for p in e.path]
        )
    except Exception as exc:  # an unresolvable $ref shows only when validation reaches it
        return [f"the schema cannot be checked: {exc}"]
    for error in errors:
        where = "/".join(str(p) for p in error.path) or "the value"
        out.append(f"{where}: {error.message}")
        if len(out) >= limit:
            break
    return out


def parse_answer(text: str) -> tuple[Any, str | None]:
    """A model's answer as JSON: the whole text, a fenced block, or the outermost object."""
    body = (text or "").strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        return json.loads(body), None
    except json.JSONDecodeError as exc:
        first, last = body.find("{"), body.rfind("}")
        if 0 <= first < last:
            try:
                return json.loads(body[first : last + 1]), None
            except json.JSONDecodeError:
                pass
        return None, f"the answer is not JSON ({exc.msg} at position {exc.pos})"


def choice_schema(labels: list[str]) -> JsonObject:
    """What a deciding agent must answer: one of the labels, and why."""
    return {
        "type": "object",
        "properties": {
            "choice": {"type": "string", "enum": list(labels)},
            "reason": {"type": "string"},
        },
        "required": ["choice"],
    }


def follow(schema: JsonObject | None, path: tuple[str, ...]) -> tuple[JsonObject | None, str | None]:
    """Walk `path` into `schema`: (the sub-schema or None when unconstrained, an error when a
    segment names a field the schema does not declare)."""
    current = schema
    for depth, part in enumerate(path):
        if not isinstance(current, dict):
            return None, None
        props = current.get("properties")
        if isinstance(props, dict):
            if part not in props:
                declared = ", ".join(props) or "none"
                where = ".".join(path[:depth]) or "the output"
                return None, f"{where} has no field '{part}' (declared: {declared})"
            current = props[part]
            continue
        items = current.get("items")
        if current.get("type") == "array" and part.lstrip("-").isdigit():
            current = items if isinstance(items, dict) else None
            continue
        return None, None
    return current if isinstance(current, dict) else None, None


def enum_of(schema: JsonObject | None) -> list[str] | None:
    if isinstance(schema, dict) and isinstance(schema.get("enum"), list):
        return [str(v) for v in schema["enum"]]
    return None


def schema_prompt(schema: JsonObject, labels: list[str] | None) -> str:
    if labels is not None:
        options = ", ".join(f'"{label}"' for label in labels)
        return (
            f"\n\nDecide by choosing exactly one of: {options}. Answer with only a JSON object: "
            '{"choice": "<one of the options>", "reason": "<one sentence>"}'
        )
    return (
        "\n\nAnswer with only a JSON object that matches this JSON Schema (no other text):\n"
        f"```json\n{json.dumps(schema, ensure_ascii=False)}\n```"
    )


def check_output(schema: JsonObject | None, answer: str) -> tuple[Any, list[str]]:
    """An agent's final text → (output, problems). Without a schema the text is the output."""
    if schema is None:
        return answer, []
    value, error = parse_answer(answer)
    if error:
        return None, [error]
    return value, problems(schema, value)
