"""Templates in workflow files: `{{ dotted.path }}` references, nothing else.

A deliberately small language. Every reference is a dotted path from one of a few roots
(`input`, `nodes.<id>.output`, `item`, `index`, `iteration`, `results`, `output`), so the
validator can check each one against the graph and the output schemas before anything runs;
a general template engine (expressions, filters, loops) could only be checked by running it.

Rendering: a string that is exactly one reference keeps the referenced value's type (a list
stays a list, useful for tool arguments); otherwise each reference is interpolated, strings as
they are and anything else as compact JSON. Dicts and lists are rendered element by element.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import ArtifactFlowError

_REF = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*(\.[A-Za-z0-9_\-]+)*$")
ROOTS = ("input", "nodes", "item", "index", "iteration", "results", "output")

Path = tuple[str, ...]


class TemplateError(ArtifactFlowError):
    """A template referenced a value that is not there when the node ran."""


def parse_path(text: str) -> Path | None:
    """`nodes.plan.output.questions` → ('nodes', 'plan', 'output', 'questions'); None if the
    text is not a dotted path."""
    if not _PATH.match(text):
        return None
    return tuple(text.split("."))


def iter_strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from iter_strings(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from iter_strings(item)


def references(value: Any) -> list[tuple[str, Path | None]]:
    """Every `{{ … }}` in a template value (str, dict or list): (raw text, parsed path)."""
    out = []
    for text in iter_strings(value):
        for match in _REF.finditer(text):
            raw = match.group(1)
            out.append((raw, parse_path(raw)))
    return out


def lookup(context: Mapping[str, Any], path: Path) -> Any:
    current: Any = context
    walked: list[str] = []
    for part in path:
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.lstrip("-").isdigit() and -len(current) <= int(part) < len(current):
            current = current[int(part)]
        else:
            where = ".".join(walked) or "the template context"
            have = ""
            if isinstance(current, Mapping):
                have = f" (it has: {', '.join(map(str, current)) or 'nothing'})"
            elif isinstance(current, list):
                have = f" (a list of {len(current)})"
            elif current is None:
                have = " (it is null)"
            raise TemplateError(f"'{'.'.join(path)}': {where} has no '{part}'{have}")
        walked.append(part)
    return current


def to_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    return json.dumps(value, ensure_ascii=False, default=str)


def render(value: Any, context: Mapping[str, Any]) -> Any:
    """Render a template value against `context` (see the module docstring)."""
    if isinstance(value, Mapping):
        return {k: render(v, context) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [render(v, context) for v in value]
    if not isinstance(value, str):
        return value
    whole = _REF.fullmatch(value.strip())  # exactly one reference: keep the value's type
    if whole is not None and (path := parse_path(whole.group(1))) is not None:
        return lookup(context, path)

    def one(match: re.Match[str]) -> str:
        path = parse_path(match.group(1))
        if path is None:
            raise TemplateError(f"'{match.group(1)}' is not a dotted path like input.topic")
        return to_text(lookup(context, path))

    return _REF.sub(one, value)
