"""PostgreSQL batch inserts as one statement: `INSERT … SELECT … FROM unnest(arrays)`.

A run's event batch (and the rows written with it, `group_commit.py`) goes to PostgreSQL as
one array per column, so a whole batch is one statement and one round trip
(`eventlog.EventLog.append_together`). This module knows how a table's columns become those
arrays; the event log decides what to insert and under which locks.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

Rows = Sequence[Mapping[str, Any]]


def _bytea_text(value: bytes) -> str:
    return "\\x" + value.hex()


# PostgreSQL array types for `unnest`, by a column's Python type (no length: a cast to
# varchar(n) would truncate, while inserting the text into the column checks its length), and
# how a value is written as text. Every array is sent as `text[]` and cast in the statement
# (`$1::text[]::int8[]`): asyncpg knows `text[]` from the start, but meets `int8[]`, `float8[]`
# and `bytea[]` by introspecting them, a recursive catalog query (~15 ms of server CPU, most of
# it planning) on every new pooled connection, so each burst that grew the pool paid it again.
# The text forms are exact: `repr` of a float reads back to the same float8, `\x`-hex is
# bytea's own input format.
_ARRAY_TYPES: dict[type, tuple[str, Callable[[Any], str] | None]] = {
    str: ("text[]", None),
    int: ("int8[]", lambda value: str(int(value))),
    float: ("float8[]", lambda value: repr(float(value))),
    bytes: ("bytea[]", _bytea_text),
    bool: ("bool[]", lambda value: "true" if value else "false"),
}


@dataclass(frozen=True)
class Unnest:
    """How to insert rows of one table from one array per column (`INSERT … SELECT unnest`)."""

    table: str
    columns: tuple[str, ...]  # quoted for SQL
    keys: tuple[str, ...]  # as in the rows
    arrays: tuple[str, ...]  # each column's array type
    binds: tuple[Callable[[Any], Any] | None, ...]  # each column's bind processor (NUL-free text)
    texts: tuple[Callable[[Any], str] | None, ...]  # each column's value as text (None: a str)

    def sql(self, first: int, *, extra: Sequence[str] = (), where: str = "") -> str:
        """The INSERT, its arrays as parameters `$first`… (each a `text[]`, cast to the
        column's array type), then one text array per `extra` key (not inserted, for `where`
        to filter the rows `u` on)."""
        types = (*self.arrays, *["text[]"] * len(extra))
        arrays = ", ".join(
            f"${first + i}::text[]" + ("" if a == "text[]" else f"::{a}")
            for i, a in enumerate(types)
        )
        names = ", ".join(self.columns)
        picked = ", ".join(f"u.{c}" for c in self.columns)
        alias = ", ".join((*self.columns, *extra))
        return f"INSERT INTO {self.table} ({names}) SELECT {picked} FROM unnest({arrays}) AS u({alias}) {where}"

    def parameters(self, rows: Rows, *, extra: Sequence[str] = ()) -> list[list[Any]]:
        """One array (of text) per column, then one per `extra` key."""
        out: list[list[Any]] = []
        for key, bind, text in zip(self.keys, self.binds, self.texts, strict=True):
            values = [row.get(key) for row in rows]
            if bind is not None:
                values = [bind(v) for v in values]
            if text is not None:
                values = [None if v is None else text(v) for v in values]
            out.append(values)
        out += [[row.get(key) for row in rows] for key in extra]
        return out


@functools.lru_cache(maxsize=64)
def unnest_for(table: sa.Table, dialect: Any) -> Unnest | None:
    """The `Unnest` of `table`, or None when a column has no array type here."""
    arrays, binds, texts = [], [], []
    for column in table.columns:
        base = column.type
        if isinstance(base, sa.types.TypeDecorator):
            base = base.impl_instance
        try:
            array = _ARRAY_TYPES.get(base.python_type)
        except NotImplementedError:
            array = None
        if array is None:
            return None
        arrays.append(array[0])
        texts.append(array[1])
        binds.append(column.type.bind_processor(dialect))
    quote = dialect.identifier_preparer.quote
    return Unnest(
        quote(table.name),
        tuple(quote(c.name) for c in table.columns),
        tuple(c.name for c in table.columns),
        tuple(arrays),
        tuple(binds),
        tuple(texts),
    )
