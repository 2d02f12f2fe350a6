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
    """A JSON value already serialised: these UTF-8 chunks, one after the other (a state's
    messages: each message's stored JSON, and the commas between), written into a body as
    they are, copied once (into the body)."""

    __slots__ = ("chunks",)

    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Raw) and b"".join(other.chunks) == b"".join(self.chunks)

    __hash__ = None  # type: ignore[assignment]

    def value(self) -> Any:
        """The value it holds, decoded (for callers that read it, not send it)."""
        return orjson.loads(b"".join(self.chunks))


def encode(value: Any) -> bytes:
    """`value` as JSON bytes: orjson, else as `json.dumps` writes it (see the module doc).
    Each `Raw` is written as a mark (NUL, its index, NUL: JSON escapes NUL in any string, so
    no other byte of the text is one), then the text is cut at the marks and joined with the
    chunks in their place: the chunks are copied once, into the body."""
    raws: list[Raw] = []

    def fragment(found: Any) -> Any:
        if isinstance(found, Raw):
            raws.append(found)
            return orjson.Fragment(b"\x00%d\x00" % (len(raws) - 1))
        raise TypeError(f"{type(found).__name__} is not JSON")

    try:
        text = orjson.dumps(value, default=fragment)
    except TypeError:
        raws.clear()
        text = _slow(value, raws)
    if not raws:
        return text
    pieces = text.split(b"\x00")
    out: list[bytes] = []
    for index, piece in enumerate(pieces):
        if index % 2:
            out += raws[int(piece)].chunks
        else:
            out.append(piece)
    return b"".join(out)


def _slow(value: Any, raws: list[Raw]) -> bytes:
    token = uuid.uuid4().hex  # no text holds it by chance

    def mark(found: Any) -> Any:
        if isinstance(found, Raw):
            raws.append(found)
            return f"\x00{token}:{len(raws) - 1}\x00"
        raise TypeError(f"{type(found).__name__} is not JSON")

    text = json.dumps(
        value, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=mark
    )
    for index in range(len(raws)):
        text = text.replace(json.dumps(f"\x00{token}:{index}\x00"), f"\x00{index}\x00", 1)
    return text.encode()


def json_response(
    content: Any, status_code: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(encode(content), status_code, headers, media_type="application/json")
