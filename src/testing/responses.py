"""What `ScriptedLLM` can be told to answer: the scripted responses and the record of a miss.

These are plain dataclasses with no server code, so a test (or a route function) builds its
script from them without touching the HTTP side; the handler turns each into wire bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .quirks import Quirks

NO_RESPONSE_MESSAGE = "ScriptedLLM: no scripted response left"


@dataclass
class Text:
    """Assistant text; streamed in pieces of ``chunk_size`` characters, finish_reason "stop".

    ``chunk_delay`` sleeps between streamed chunks (to test cancellation mid-stream or
    attaching to a run while it is producing output). ``quirks`` add server habits to this
    response only. ``reset_after`` streams that many pieces, then resets the connection (a TCP
    RST, as a crashed server or a proxy would).
    """

    content: str
    chunk_size: int = 8
    chunk_delay: float = 0.0
    quirks: Quirks | None = None
    finish_reason: str = "stop"  # "length": the answer was cut off by max_tokens
    reset_after: int | None = None


@dataclass
class Call:
    """One tool call.  A ``str`` ``arguments`` is sent verbatim (may be malformed JSON)."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass
class ToolCalls:
    """Assistant tool calls (optionally preceded by ``content``), finish_reason "tool_calls".

    Arguments are streamed in fragments of ``chunk_size`` characters, like OpenAI does.
    """

    calls: list[Call]
    content: str = ""
    chunk_size: int = 8
    chunk_delay: float = 0.0
    quirks: Quirks | None = None
    finish_reason: str = "tool_calls"


@dataclass
class Error:
    """An HTTP error with an OpenAI-style JSON body (and ``Retry-After`` when given)."""

    status: int
    message: str = "ScriptedLLM: scripted error"
    retry_after: float | None = None
    type: str | None = None
    code: str | None = None


@dataclass
class Delay:
    """Sleep ``seconds`` (interruptible by ``close()``) and then answer with ``then``."""

    seconds: float
    then: Response


@dataclass
class Hang:
    """Never answer; the connection is dropped when the server closes."""


Response = Text | ToolCalls | Error | Delay | Hang
Route = Callable[[dict[str, Any]], "Response | None"]


@dataclass
class Unexpected:
    """A request the server could not answer from its script."""

    path: str
    reason: str
    request: dict[str, Any] | None = None
