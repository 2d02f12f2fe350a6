"""Every mistake in a config file, named, in one message.

pydantic ignores keys a model does not declare (`extra="ignore"`), so `timout: 5` under `llm:`
passed silently, and a `ValidationError` was reported by its first error only: a file with
three mistakes took three runs to fix. `unknown_keys` walks the YAML mapping along the
model's fields (sections, and mappings of sections such as `mcp_servers`) and names each key
the model does not know, with the nearest valid key (`difflib`, the standard library's
"did you mean"); `validation_lines` turns every error of a `ValidationError` into one line.
`load_settings` raises them together, or logs the unknown keys as warnings when the file says
`strict: false`.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError


def nearest(word: str, choices: Iterable[str]) -> str | None:
    """The closest of `choices` to `word`, or None when none is close."""
    import difflib  # only on the error path

    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def unknown_key_line(where: str, key: str, known: Iterable[str]) -> str:
    """`field 'llm.timout': unknown key (did you mean 'timeout'?)` and the valid keys when
    none is close."""
    known = sorted(known)
    guess = nearest(key, known)
    hint = f"did you mean '{guess}'?" if guess else f"valid keys: {', '.join(known)}"
    return f"field '{where}': unknown key ({hint})"


Path = tuple[str, ...]


def unknown_keys(
    model: type[BaseModel], data: Mapping[str, Any], prefix: Path = ()
) -> list[tuple[Path, str]]:
    """`(path, line)` for each key of `data` (and of its sections) that `model` does not
    declare."""
    found: list[tuple[Path, str]] = []
    fields = model.model_fields
    for key, value in data.items():
        path = (*prefix, str(key))
        field = fields.get(str(key))
        if field is None:
            if model.model_config.get("extra") != "allow":
                found.append((path, unknown_key_line(".".join(path), str(key), fields)))
            continue
        section = _section_model(field.annotation)
        if section is not None and isinstance(value, Mapping):
            found += unknown_keys(section, value, path)
            continue
        entries = _mapping_of_sections(field.annotation)
        if entries is not None and isinstance(value, Mapping):
            for name, entry in value.items():
                if isinstance(entry, Mapping):
                    found += unknown_keys(entries, entry, (*path, str(name)))
    return found


def drop(data: dict[str, Any], path: Path) -> None:
    """Remove the key at `path` from the nested mapping `data` (for `strict: false`)."""
    *parents, last = path
    node: Any = data
    for key in parents:
        node = node[key]
    node.pop(last, None)


def validation_lines(exc: ValidationError, reported: Iterable[Path] = ()) -> list[str]:
    """Every error of `exc` as `field 'a.b': message`, but for the unknown keys already
    `reported` (with their nearest valid key) by `unknown_keys`."""
    skip = {tuple(p) for p in reported}
    lines = []
    for err in exc.errors():
        loc = tuple(str(p) for p in err["loc"])
        if err["type"] == "extra_forbidden" and loc in skip:
            continue
        lines.append(f"field '{'.'.join(loc) or '(top level)'}': {err['msg']}")
    return lines


def _section_model(annotation: Any) -> type[BaseModel] | None:
    for candidate in _members(annotation):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _mapping_of_sections(annotation: Any) -> type[BaseModel] | None:
    for candidate in _members(annotation):
        if typing.get_origin(candidate) is dict:
            args = typing.get_args(candidate)
            if len(args) == 2:
                return _section_model(args[1])
    return None


def _members(annotation: Any) -> list[Any]:
    """The alternatives of `X | None` (or of `Union[...]`), else the annotation itself."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        return list(typing.get_args(annotation))
    return [annotation]
