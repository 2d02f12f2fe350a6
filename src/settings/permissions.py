"""Tool permission levels, as the config names them (`permissions: {web_fetch: confirm}`).

Defined here, below the tools, because the settings validate them; `artifactflow.tools.base`
and the package root re-export `Permission` for tool authors.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any


class Permission(enum.StrEnum):
    """Whether a tool runs at once (AUTO) or only after a person approves it (CONFIRM)."""

    AUTO = "auto"
    CONFIRM = "confirm"

    @classmethod
    def parse(cls, value: str | Permission) -> Permission:
        if isinstance(value, Permission):
            return value
        try:
            return cls(str(value).strip().lower())
        except ValueError:
            raise ValueError(
                f"unknown permission level {value!r}; use 'auto' or 'confirm'"
            ) from None


def parse_permissions(value: Any, names: str) -> dict[str, Permission]:
    """A config map of `names` (tool names, or a server's) to levels; None is an empty map."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"permissions must map {names} to 'auto' or 'confirm'")
    return {str(k): Permission.parse(v) for k, v in value.items()}
