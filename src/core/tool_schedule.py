"""Order within one round of tool calls (the calls of one response, or of one subagent step).

The tool node runs a round's calls concurrently, with two rules on top:

- Calls on the same resource never overlap. A tool names its resource with `serial_key`
  (the artifact tools: `"artifact:{id}"`); calls whose keys are equal run one after another
  in call order, so a create-then-update of one artifact in one response works instead of the
  update racing the create. Calls without a key run at once, as before.
- `tool_complete` events come out in call order, whatever order the calls finish in: each is
  held until every earlier call's is out, then released at once (no waiting for the round).
  Results already went back to the model in call order; now the event log agrees.

Nothing here awaits anything but the previous call on the same key, which started earlier,
so the chain cannot deadlock; a call that fails or is cancelled still frees its successor.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from ..events.payloads import AgentEventData, ToolCompleteData
from ..tools.registry import ToolRegistry, parse_arguments

Emit = Callable[[AgentEventData], None]


def serial_key(tools: ToolRegistry, call: Mapping[str, Any], decision: Mapping[str, Any] | None) -> str | None:
    """The resource key of a call about to run (None: no key, or it will not run)."""
    if decision is not None and decision.get("action") == "deny":
        return None
    tool = tools.get(call["name"])
    if tool is None or tool.serial_key is None:
        return None
    raw = decision.get("arguments") if decision and decision.get("action") == "edit" else None
    args, error = parse_arguments(raw if raw is not None else call["arguments"])
    if error is not None or args is None:
        return None  # the call fails validation without touching anything
    return tool.serial_key_for(args)


class RoundSchedule:
    """The two ordering rules of one round (see the module docstring).

    `sequence`: ids of the calls that will emit a `tool_complete`, in call order.
    `keys`: call id → resource key (or None) of the calls that will run.
    """

    def __init__(self, sequence: Iterable[str], keys: dict[str, str | None]) -> None:
        self._sequence = list(sequence)
        self._known = set(self._sequence)
        self._next = 0
        self._held: dict[str, Callable[[], None]] = {}
        self._done: dict[str, asyncio.Event] = {}
        self._after: dict[str, asyncio.Event] = {}
        last: dict[str, str] = {}
        for call_id in self._sequence:
            key = keys.get(call_id)
            if key is None:
                continue
            self._done[call_id] = asyncio.Event()
            if key in last:
                self._after[call_id] = self._done[last[key]]
            last[key] = call_id

    @asynccontextmanager
    async def turn(self, call_id: str) -> AsyncIterator[None]:
        """Wait for the previous call on the same key to finish; free the next one on exit."""
        before = self._after.get(call_id)
        if before is not None:
            await before.wait()
        try:
            yield
        finally:
            done = self._done.get(call_id)
            if done is not None:
                done.set()

    def release(self, call_id: str, send: Callable[[], None]) -> None:
        """Send a call's `tool_complete` once every earlier call's has been sent."""
        if call_id not in self._known:
            send()
            return
        self._held[call_id] = send
        while self._next < len(self._sequence) and self._sequence[self._next] in self._held:
            self._held.pop(self._sequence[self._next])()
            self._next += 1

    def emitter(self, emit: Emit, call_id: str) -> Emit:
        """`emit`, except that this call's `tool_complete` waits for its turn."""

        def ordered(data: AgentEventData) -> None:
            if isinstance(data, ToolCompleteData):
                self.release(call_id, lambda: emit(data))
            else:
                emit(data)

        return ordered
