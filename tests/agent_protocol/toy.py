"""The behaviour both servers share under the suite (LangGraph's dev server runs
scripts/protocol_reference/graph.py; artifactflow runs its lead agent on a scripted model that
answers by the same rules):

- "hello ..."               -> an answer streamed in token chunks;
- "write a note: TEXT"      -> a call of the CONFIRM tool `write_note(text=TEXT)`, asked as one
                               LangChain human-in-the-loop interrupt; approved, the tool runs
                               and the model answers "Noted: ...";
- "write notes: A; B"        -> two `write_note` calls in one model turn: one interrupt with two
                               action requests (one decision per request);
- "slow ..."                -> a long answer streamed slowly (a run to cancel or double-text).
"""

from __future__ import annotations

from typing import Any

from artifactflow import tool
from artifactflow.testing import Call, Text, ToolCalls

ANSWER = "Hello from the toy graph."
NOTE_PREFIX = "write a note:"
NOTES_PREFIX = "write notes:"
SLOW_ANSWER = " ".join(f"word{i}" for i in range(40))

NOTES: list[str] = []  # write_note's side effects (artifactflow only: the reference's are remote)


@tool(permission="confirm")
async def write_note(text: str) -> str:
    """Save a note (needs approval)."""
    NOTES.append(text)
    return f"saved note {text!r}"


def _text(message: dict[str, Any]) -> str:
    content = message.get("content") or ""
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def toy_route(request: dict[str, Any]) -> Any:
    """The scripted model's answer to a chat request, by the toy graph's rules."""
    messages = request.get("messages") or []
    if not messages:
        return None
    last = messages[-1]
    if last.get("role") == "tool":
        return Text(f"Noted: {_text(last)}", chunk_size=6)
    text = _text(last)
    lowered = text.lower()
    if NOTES_PREFIX in lowered:
        notes = text[lowered.index(NOTES_PREFIX) + len(NOTES_PREFIX):].split(";")
        return ToolCalls([Call("write_note", {"text": n.strip()}) for n in notes])
    if NOTE_PREFIX in lowered:
        note = text[lowered.index(NOTE_PREFIX) + len(NOTE_PREFIX):].strip()
        return ToolCalls([Call("write_note", {"text": note})])
    if "slow" in lowered:
        return Text(SLOW_ANSWER, chunk_size=6, chunk_delay=0.1)
    return Text(ANSWER, chunk_size=5)
