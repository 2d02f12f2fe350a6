"""How store rows hold JSON and events (shared by the repository and the event log).

JSON is stored as text so both backends behave the same; an event whose JSON is larger than
`COMPRESS_EVENTS_OVER` bytes is zlib-compressed into `data_z` (tool results are the bulk of the
store and shrink 2-4x; zlib level 1: about half the CPU of level 6 for ~4 % more bytes).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from typing import Any

import orjson
from sqlalchemy.engine import RowMapping

from .rows import EventRow, StoredEventRow

COMPRESS_EVENTS_OVER = 1024


_ORJSON = orjson.OPT_NON_STR_KEYS


def dumps(value: Any) -> str:
    """`value` as JSON text, compact, non-ASCII kept, anything else as `str()`. orjson writes it
    several times faster than `json.dumps` (every event of every round passes here); the
    standard encoder takes what orjson refuses (an integer wider than 64 bits)."""
    try:
        return orjson.dumps(value, default=str, option=_ORJSON).decode()
    except TypeError:
        return json.dumps(value, ensure_ascii=False, default=str)


def loads(value: str | None) -> Any:
    return None if value is None else json.loads(value)


def event_row(message_id: str, event: Mapping[str, Any]) -> StoredEventRow:
    """An event (`event_id`, `type`, `agent`, `timestamp`, `data`) → an `af_events` row."""
    text = dumps(event.get("data") or {})
    packed = None
    if len(text) > COMPRESS_EVENTS_OVER:
        packed = zlib.compress(text.encode("utf-8"), 1)
        text = ""
    return StoredEventRow(
        message_id=message_id,
        event_id=event["event_id"],
        type=event["type"],
        agent=event.get("agent"),
        timestamp=event["timestamp"],
        data=text,
        data_z=packed,
    )


def event_record(row: RowMapping) -> EventRow:
    """An `af_events` row → the event dict callers see (`data` decoded)."""
    record: Any = dict(row)
    packed = record.pop("data_z", None)
    if packed is not None:
        record["data"] = json.loads(zlib.decompress(packed).decode("utf-8"))
    else:
        record["data"] = loads(record["data"])
    return record
