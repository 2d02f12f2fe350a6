"""The script and the record of a `ScriptedLLM`: what it will answer and what it was asked.

This is the state the test thread and the server's handler threads share, behind one lock:
the FIFO queue and routes the test fills, the requests, headers and refusals the handlers
record, and the stop event that makes every sleep of a handler interruptible. It holds no
sockets, so the handler (``handler.py``) depends on it and `ScriptedLLM` adds only the
server's lifetime on top (``scripted_llm.py``).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from typing import Any, Generic, Self, TypeVar, overload

from .quirks import NO_QUIRKS, Quirks
from .responses import NO_RESPONSE_MESSAGE, Error, Response, Route, Unexpected

_STEP = 0.05  # max wait per step of interruptible sleeps (close() wakes them at once)
T = TypeVar("T")


class _Listing(Generic[T]):
    """A read-only attribute giving a copy of one recorded list, taken under the lock."""

    def __init__(self, attribute: str, doc: str = "") -> None:
        self.attribute = attribute
        self.__doc__ = doc

    @overload
    def __get__(self, script: None, owner: type) -> _Listing[T]: ...
    @overload
    def __get__(self, script: Script, owner: type) -> list[T]: ...
    def __get__(self, script: Script | None, owner: type) -> _Listing[T] | list[T]:
        if script is None:
            return self
        with script._lock:
            return list(getattr(script, self.attribute))


class Script:
    """Responses to give and requests received; shared by the test and the handler threads."""

    def _record_embeddings(self, texts: int) -> None:
        with self._lock:
            self.embedding_requests += 1
            self.embedded_texts += texts

    def __init__(
        self,
        *responses: Response,
        models: list[str] | None = None,
        context_window: int | None = None,
        chars_per_token: float = 4.0,
        quirks: Quirks = NO_QUIRKS,
    ) -> None:
        self.models: list[str] = list(models or ["scripted-model"])
        self.quirks = quirks  # may be changed between requests
        self.context_window = context_window
        self.chars_per_token = chars_per_token
        self._refused: list[str] = []
        self._rejected: list[int] = []
        self._accepted: list[int] = []
        self._sizes: list[int] = []
        self._times: list[float] = []
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._active = 0
        self._stop = threading.Event()
        self._queue: deque[Response] = deque(responses)
        self._routes: list[Route] = []
        self._requests: list[dict[str, Any]] = []
        self._headers: list[dict[str, str]] = []
        self._unexpected: list[Unexpected] = []
        self._disconnects = 0
        self.embedding_dims = 384  # `/v1/embeddings` vectors (embeddings.py)
        self.embedded_texts = 0  # texts embedded by `/v1/embeddings` so far
        self.embedding_requests = 0
        self._call_ids = itertools.count(1)
        self._completion_ids = itertools.count(1)

    # ---- scripting

    def script(self, *responses: Response) -> Self:
        """Append responses to the FIFO queue (one consumed per chat request)."""
        with self._lock:
            self._queue.extend(responses)
        return self

    def route(self, fn: Route) -> Route:
        """Register ``fn(request_json) -> Response | None``, consulted before the queue.

        Routes are tried in registration order; the first non-None answer wins.
        Usable as a decorator.
        """
        with self._lock:
            self._routes.append(fn)
        return fn

    def clear_routes(self) -> None:
        with self._lock:
            self._routes.clear()

    @property
    def remaining(self) -> int:
        """Number of queued responses not yet consumed."""
        with self._lock:
            return len(self._queue)

    # ---- inspection

    requests = _Listing[dict[str, Any]](
        "_requests", "Every chat request body (parsed JSON), in arrival order (a snapshot copy)."
    )
    request_headers = _Listing[dict[str, str]](
        "_headers", "Headers (lower-cased names) of each chat request, parallel to ``requests``."
    )
    unexpected = _Listing[Unexpected](
        "_unexpected", "Requests nothing answered (empty queue, bad path, failing route...)."
    )
    rejected = _Listing[int](
        "_rejected", "Prompt figures of the requests refused as over ``context_window``."
    )
    accepted_prompt_tokens = _Listing[int](
        "_accepted", "Prompt figures of the requests within ``context_window``, in arrival order."
    )
    request_sizes = _Listing[int](
        "_sizes", "Body bytes of each chat request, parallel to ``requests``."
    )
    request_times = _Listing[float](
        "_times",
        "``time.perf_counter()`` at each chat request's arrival, parallel to ``requests``.",
    )
    refused = _Listing[str](
        "_refused",
        "Error messages of the requests refused because of ``quirks`` (null content, …).",
    )

    @property
    def last_request(self) -> dict[str, Any] | None:
        with self._lock:
            return self._requests[-1] if self._requests else None

    @property
    def request_count(self) -> int:
        with self._lock:
            return len(self._requests)

    @property
    def disconnects(self) -> int:
        """How many responses were cut short because the client went away."""
        with self._lock:
            return self._disconnects

    # ---- used by the handler threads

    def _record_request(self, body: dict[str, Any], headers: dict[str, str], size: int = 0) -> None:
        with self._lock:
            self._requests.append(body)
            self._headers.append(headers)
            self._sizes.append(size)
            self._times.append(time.perf_counter())

    def _record(self, items: list[T], item: T) -> None:
        with self._lock:
            items.append(item)

    def _record_rejected(self, prompt: int) -> None:
        self._record(self._rejected, prompt)

    def _record_accepted(self, prompt: int) -> None:
        self._record(self._accepted, prompt)

    def _record_refused(self, message: str) -> None:
        self._record(self._refused, message)

    def _record_unexpected(self, item: Unexpected) -> None:
        self._record(self._unexpected, item)

    def _note_disconnect(self) -> None:
        with self._lock:
            self._disconnects += 1

    def _next_response(self, body: dict[str, Any]) -> Response | None:
        with self._lock:
            routes = list(self._routes)
        for fn in routes:
            try:
                answer = fn(body)
            except Exception as exc:  # a broken route must not kill the handler silently
                self._record_unexpected(
                    Unexpected("/v1/chat/completions", f"route {fn!r} raised {exc!r}", body)
                )
                return Error(500, f"ScriptedLLM: route raised {exc!r}")
            if answer is not None:
                return answer
        with self._lock:
            if self._queue:
                return self._queue.popleft()
            self._unexpected.append(Unexpected("/v1/chat/completions", NO_RESPONSE_MESSAGE, body))
        return None

    def _new_call_id(self) -> str:
        with self._lock:
            return f"call_{next(self._call_ids)}"

    def _new_completion_id(self) -> str:
        with self._lock:
            return f"chatcmpl-scripted-{next(self._completion_ids)}"

    def _sleep(self, seconds: float) -> bool:
        """Sleep in small steps; False as soon as the server is closing."""
        deadline = time.monotonic() + seconds
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            self._stop.wait(min(_STEP, left))  # set() wakes this early
        return False

    def _enter(self) -> None:
        with self._lock:
            self._active += 1

    def _leave(self) -> None:
        with self._idle:
            self._active -= 1
            self._idle.notify_all()
