"""Lifecycle hooks: change behaviour at each step of a run, or watch it.

Public nouns: `Hooks` (subclass it; every method is a no-op), the typed records hooks
receive (`types.py`), `Refuse`, and `HookRunner`, which the engine uses to run them in order
(`dispatch.py`). Exactly-once keying for points inside re-runnable nodes is in `dedupe.py`;
loading hooks named in config is in `loader.py`. Built-in hooks: `tracing.py`
(OpenTelemetry GenAI spans), `redaction.py`, `policy.py`.
"""

from __future__ import annotations

from . import types
from .base import POINTS, Hooks, Point
from .dedupe import KEYED_POINTS, HookLedger, MemoryHookLedger, StoreHookLedger, hook_key
from .dispatch import HookError, HookRunner, hook_name
from .types import *  # noqa: F403 (the records hooks receive: `types.__all__`)

__all__ = [
    "KEYED_POINTS",
    "POINTS",
    "HookError",
    "HookLedger",
    "HookRunner",
    "Hooks",
    "MemoryHookLedger",
    "Point",
    "StoreHookLedger",
    "hook_key",
    "hook_name",
]
__all__ += types.__all__
