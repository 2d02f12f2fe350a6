"""Readable diffs of what a replay sent against what the recording holds (difflib).

Messages are rendered one block per message (`[3] tool (call c1):` then its text, indented),
so a unified diff points at the message and the line that changed; JSON values (arguments,
tool specs) are pretty-printed with sorted keys first. Long diffs are cut with a count of
what was left out.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from typing import Any

MAX_LINES = 120


def render_messages(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    lines: list[str] = []
    for index, message in enumerate(messages):
        role = message.get("role", "?")
        label = f"[{index}] {role}"
        if message.get("tool_call_id"):
            label += f" (call {message['tool_call_id']})"
        lines.append(label + ":")
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        lines += ["    " + line for line in (text or "").splitlines()]
        for call in message.get("tool_calls") or []:
            function = call.get("function") or call
            lines.append(
                f"    -> {function.get('name')}({function.get('arguments')}) id={call.get('id')}"
            )
    return lines


def render_json(value: Any) -> list[str]:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str).splitlines()


def unified(recorded: list[str], replayed: list[str], *, new: str = "replay") -> str:
    lines = list(
        difflib.unified_diff(recorded, replayed, "recorded", new, n=2, lineterm="")
    )
    if len(lines) > MAX_LINES:
        lines = lines[:MAX_LINES] + [f"... ({len(lines) - MAX_LINES} more diff lines)"]
    return "\n".join(lines)


def messages_diff(recorded: Sequence[Mapping[str, Any]], replayed: Sequence[Mapping[str, Any]]) -> str:
    return unified(render_messages(recorded), render_messages(replayed))


def json_diff(recorded: Any, replayed: Any, *, new: str = "replay") -> str:
    return unified(render_json(recorded), render_json(replayed), new=new)


def text_diff(recorded: str, replayed: str, *, new: str = "replay") -> str:
    return unified((recorded or "").splitlines(), (replayed or "").splitlines(), new=new)


def similarity(a: str, b: str) -> float:
    return difflib.SequenceMatcher(None, a or "", b or "", autojunk=False).ratio()
