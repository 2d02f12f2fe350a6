"""The figures and error bodies `ScriptedLLM` answers with, as pure functions of a request.

Usage is deterministic (characters / 4) so tests can assert exact token counts; the windowed
server measures a request with `request_tokens` and refuses it with OpenAI's own
``context_length_exceeded`` body. Kept apart from the server so tests and benchmarks can
compute the same figures the server will report.
"""

from __future__ import annotations

import json
import math
from typing import Any

_ERROR_TYPES: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", None),
    404: ("invalid_request_error", "model_not_found"),
    409: ("conflict_error", None),
    422: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
}


def error_body(
    status: int, message: str, type_: str | None = None, code: str | None = None
) -> dict[str, Any]:
    default_type, default_code = _ERROR_TYPES.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    return {
        "error": {
            "message": message,
            "type": type_ or default_type,
            "param": None,
            "code": code if code is not None else default_code,
        }
    }


def _content_chars(content: Any) -> int:
    """Characters of a message's content: a string, or the texts of a list of parts."""
    if content is None:
        return 0
    if isinstance(content, list):
        return sum(len(_part_text(part)) for part in content)
    return len(content if isinstance(content, str) else str(content))


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    text = part.get("text") if isinstance(part, dict) else None
    return text if isinstance(text, str) else ""


def prompt_tokens(request: dict[str, Any]) -> int:
    """Deterministic prompt usage: characters of all message contents // 4 (min 1)."""
    messages = request.get("messages") or []
    chars = sum(_content_chars(m.get("content")) for m in messages if isinstance(m, dict))
    return max(1, chars // 4)


MESSAGE_FRAME_TOKENS = 3


def request_tokens(request: dict[str, Any], chars_per_token: float = 4.0) -> int:
    """The windowed server's prompt figure: message contents, tool-call names and arguments,
    tool-call ids and the tools' JSON, in characters / ``chars_per_token`` (rounded up), plus
    ``MESSAGE_FRAME_TOKENS`` per message."""
    chars = 0
    frames = 0
    for message in request.get("messages") or []:
        if not isinstance(message, dict):
            continue
        frames += 1
        chars += _content_chars(message.get("content"))
        chars += len(str(message.get("tool_call_id") or ""))
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            chars += len(str(function.get("name") or "")) + len(str(function.get("arguments") or ""))
            chars += len(str(call.get("id") or ""))
    if request.get("tools"):
        chars += len(json.dumps(request["tools"], separators=(",", ":")))
    return math.ceil(chars / chars_per_token) + frames * MESSAGE_FRAME_TOKENS


def context_length_body(window: int, prompt: int, completion: int = 0) -> dict[str, Any]:
    """OpenAI's 400 body for a request over the window (wording as the API sends it)."""
    if completion:
        message = (
            f"This model's maximum context length is {window} tokens. However, you requested "
            f"{prompt + completion} tokens ({prompt} in the messages, {completion} in the "
            "completion). Please reduce the length of the messages or completion."
        )
    else:
        message = (
            f"This model's maximum context length is {window} tokens. However, your messages "
            f"resulted in {prompt} tokens. Please reduce the length of the messages."
        )
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


def completion_tokens(text: str, arguments: list[str]) -> int:
    """Deterministic completion usage: len(text + all tool-call arguments) // 4 (min 1)."""
    return max(1, (len(text) + sum(len(a) for a in arguments)) // 4)

