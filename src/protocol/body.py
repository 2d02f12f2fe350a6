"""Response bodies that carry already-serialised JSON (`Raw`), so a thread's state is sent by
joining its messages' stored JSON (`renderings.py`), not by decoding them to dicts and
encoding them again: at 1,000 messages that round trip was most of a state read's time.

`json_bytes` is orjson, with `Raw` written as it is (`orjson.Fragment`). orjson writes the
same JSON as the responses before (Starlette's `json.dumps(ensure_ascii=False,
separators=(",", ":"))`): the same bytes for strings, integers, booleans and null, and the
same numbers for floats (spelled alike but for exponents: `1e16`, not `1e+16`). What orjson
refuses (an integer beyond 64 bits, a key that is not a string) falls back to `json.dumps`
with each `Raw` put in its place afterwards.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import orjson
from fastapi import Response


class Raw:
    """A JSON value already serialised (UTF-8 bytes), written into a body as it is."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Raw) and other.data == self.data

    __hash__ = None  # type: ignore[assignment]

    def value(self) -> Any:
        """The value it holds, decoded (for callers that read it, not send it)."""
        return orjson.loads(self.data)


def _fragment(value: Any) -> Any:
    if isinstance(value, Raw):
        return orjson.Fragment(value.data)
    raise TypeError(f"{type(value).__name__} is not JSON")


def encode(value: Any) -> bytes:
    """`value` as JSON bytes: orjson, else as `json.dumps` writes it (see the module doc)."""
    try:
        return orjson.dumps(value, default=_fragment)
    except TypeError:
        return _slow(value)


def _slow(value: Any) -> bytes:
    raws: list[bytes] = []
    token = uuid.uuid4().hex  # no text holds it by chance

    def mark(found: Any) -> Any:
        if isinstance(found, Raw):
            raws.append(found.data)
            return f"\x00{token}:{len(raws) - 1}\x00"
        raise TypeError(f"{type(found).__name__} is not JSON")

    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=mark)
    out = text.encode()
    for index, data in enumerate(raws):
        out = out.replace(json.dumps(f"\x00{token}:{index}\x00").encode(), data, 1)
    return out


def json_response(
    content: Any, status_code: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(encode(content), status_code, headers, media_type="application/json")
