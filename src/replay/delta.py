"""Prefix deltas: how a request's message list is stored without repeating its history.

Consecutive requests of one agent invocation share everything but the newest messages (the
system prompt, the task, the earlier rounds). A request is therefore written as
`{"base": KEY, "keep": N, "append": [...]}`: the first N messages of the request stored under
KEY, then the new ones. Over a run that is linear in what the run produced, where storing each
request whole is quadratic. The same encoding is used in the app store (KEY = the row's `seq`)
and in session files (KEY = the step number).

Comparison is by value with an identity shortcut per message (`x is y or x == y`): the
messages a node sends are mostly the very dicts of its state, so finding the shared prefix
costs little more than walking the list.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

Message = TypeVar("Message", bound=Mapping[str, Any])  # a chat message (`shapes.ChatMessage`)
Key = TypeVar("Key", bound=Hashable)  # a row's seq, a session step


def common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items `a` and `b` share."""
    n = min(len(a), len(b))
    for i in range(n):
        x, y = a[i], b[i]
        if x is not y and x != y:
            return i
    return n


def encode(
    messages: Sequence[Message], candidates: Iterable[tuple[Key, Sequence[Message]]]
) -> tuple[Key | None, int, list[Message]]:
    """Pick the candidate sharing the longest prefix with `messages` (the first on ties);
    return (its key or None, how many messages it gives, the messages to store)."""
    best_key: Key | None = None
    best = 0
    for key, other in candidates:
        shared = common_prefix(messages, other)
        if shared > best:
            best_key, best = key, shared
    return best_key, best, list(messages[best:])


def decode(
    entry: Mapping[str, Any], resolve: Callable[[Any], Sequence[Message]]
) -> list[Message]:
    """The full message list of an encoded `entry`; `resolve(key)` gives a base's list."""
    base = entry.get("base")
    keep = int(entry.get("keep") or 0)
    head: list[Message] = []
    if base is not None and keep:
        prior = resolve(base)
        if len(prior) < keep:
            raise ValueError(f"delta base {base!r} has {len(prior)} messages, {keep} are needed")
        head = list(prior[:keep])
    return head + list(entry.get("append") or [])
