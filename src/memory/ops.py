"""What `MemoryStore`'s `SearchOp.filter` and `ListNamespacesOp` mean, apart from the store.

- A filter maps a field of the item's value to a value (equality) or to operators `$eq $ne
  $gt $gte $lt $lte`, as LangGraph's stores read it.
- Namespace conditions are prefixes or suffixes, where a `*` label matches any label, as in
  LangGraph, except in first place of a prefix: the first label is the namespace's owner (a
  user), and a user whose id is `*` must not list everyone's namespaces through the Agent
  Protocol store (which puts the caller's id first). There `*` is the literal label.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langgraph.store.base import ListNamespacesOp

from .records import ns_tuple


def owner_of(op: ListNamespacesOp) -> str | None:
    """The first label of the op's prefix condition, read literally (None: no prefix)."""
    for condition in op.match_conditions or ():
        if condition.match_type == "prefix" and condition.path:
            return condition.path[0]
    return None


def condition(namespace: tuple[str, ...], match_type: str, path: tuple[str, ...]) -> bool:
    if len(path) > len(namespace):
        return False
    if match_type == "prefix":
        part = namespace[: len(path)]
        if path[0] != part[0]:  # the owner: never a wildcard
            return False
    else:
        part = namespace[len(namespace) - len(path):]
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))


def listed(stored: Iterable[str], op: ListNamespacesOp) -> list[tuple[str, ...]]:
    """The namespaces among the `stored` keys that meet the op's conditions, cut to its
    `max_depth`, sorted, then its page."""
    found: set[tuple[str, ...]] = set()
    for key in stored:
        namespace = ns_tuple(key)
        if all(condition(namespace, c.match_type, tuple(c.path)) for c in op.match_conditions or ()):
            found.add(namespace[: op.max_depth] if op.max_depth is not None else namespace)
    return sorted(found)[op.offset : op.offset + op.limit]


_OPS = {
    "$eq": lambda a, b: a == b, "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: a is not None and a > b, "$gte": lambda a, b: a is not None and a >= b,
    "$lt": lambda a, b: a is not None and a < b, "$lte": lambda a, b: a is not None and a <= b,
}


def matches(value: dict[str, Any], conditions: dict[str, Any]) -> bool:
    for field, wanted in conditions.items():
        actual = value.get(field)
        if isinstance(wanted, dict) and wanted and all(k in _OPS for k in wanted):
            if not all(_OPS[k](actual, v) for k, v in wanted.items()):
                return False
        elif actual != wanted:
            return False
    return True
