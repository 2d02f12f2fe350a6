"""Wire habits of real OpenAI-compatible servers, reproducible in `ScriptedLLM`.

Each flag copies one habit seen when artifactflow was run against servers nobody here wrote
(issue 11), so a client fix for it stays fixed:

- `repeat_tool_names`: llama-cpp-python repeats `function.name` (and the call id) in every
  streamed delta of a tool call; a client that appends names calls `echoecho…`.
- `reject_null_content`: llama-cpp-python answers HTTP 500 to an assistant message whose
  `"content"` is `null` (`""` or no key is accepted).
- `strict_tool_arguments`: llama.cpp's `llama-server` answers HTTP 500 ("Failed to parse tool
  call arguments as JSON") to a history whose assistant tool-call arguments are not JSON.
- `no_finish_reason`: the stream ends without a chunk carrying `finish_reason`.
- `empty_stream`: HTTP 200, then the stream closes with no chunk at all.
- `no_streamed_tools`: a streamed request that offers tools gets an empty stream
  (llama-cpp-python raises "Automatic streaming tool choice is not supported" inside a 200);
  the same request without `stream` is answered.
- `no_usage`: usage is never sent, even when `stream_options.include_usage` asks for it.

Quirks are set for a whole server (`ScriptedLLM(quirks=...)`) or for one scripted response
(`Text(..., quirks=...)`); both apply, flag by flag. `LLAMA_CPP_PYTHON` and `LLAMA_SERVER`
bundle the habits of those two servers.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Quirks:
    """Switchable server habits (all off by default); `a | b` turns on the flags of both."""

    repeat_tool_names: bool = False
    reject_null_content: bool = False
    strict_tool_arguments: bool = False
    no_finish_reason: bool = False
    empty_stream: bool = False
    no_streamed_tools: bool = False
    no_usage: bool = False

    def __or__(self, other: Quirks | None) -> Quirks:
        if other is None:
            return self
        return Quirks(
            **{
                f.name: getattr(self, f.name) or getattr(other, f.name)
                for f in dataclasses.fields(self)
            }
        )

    def __bool__(self) -> bool:
        return any(getattr(self, f.name) for f in dataclasses.fields(self))


NO_QUIRKS = Quirks()
LLAMA_CPP_PYTHON = Quirks(
    repeat_tool_names=True, reject_null_content=True, no_streamed_tools=True, no_usage=True
)
LLAMA_SERVER = Quirks(strict_tool_arguments=True)


def request_refusal(quirks: Quirks, request: dict[str, Any]) -> tuple[int, str] | None:
    """The HTTP status and message a server with `quirks` refuses `request` with, if any."""
    for index, message in enumerate(request.get("messages") or []):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        if quirks.reject_null_content and "content" in message and message["content"] is None:
            return 500, (
                f"1 validation error: messages.{index}.content: Input should be a valid string "
                "[type=string_type, input_value=None]"
            )
        if quirks.strict_tool_arguments:
            for call in message.get("tool_calls") or []:
                arguments = (call.get("function") or {}).get("arguments")
                try:
                    json.loads(arguments if isinstance(arguments, str) else "")
                except ValueError as exc:
                    return 500, (
                        "Failed to parse tool call arguments as JSON: "
                        f"[json.exception.parse_error.101] {exc}; last read: {arguments!r}"
                    )
    return None


def streams_nothing(quirks: Quirks, request: dict[str, Any]) -> bool:
    """Whether a streamed answer to `request` is an empty stream."""
    return quirks.empty_stream or (quirks.no_streamed_tools and bool(request.get("tools")))


def argument_delta(
    quirks: Quirks, index: int, call_id: str, name: str, fragment: str
) -> dict[str, Any]:
    """One streamed fragment of a tool call's arguments, with the name repeated if asked."""
    part: dict[str, Any] = {"index": index, "function": {"arguments": fragment}}
    if quirks.repeat_tool_names:
        part.update(id=call_id, type="function")
        part["function"] = {"name": name, "arguments": fragment}
    return {"tool_calls": [part]}
