"""Our records in LangChain's shapes, and LangChain's shapes as our requests.

- Messages: a conversation's path becomes `{"type": "human" | "ai" | "tool", ...}` dicts (the
  `messages` of a thread's values). The lead agent's model calls are its AI messages, with ids
  `<message_id>:ai:<n>` (n-th model call of the lead in that message), so the token chunks
  streamed as `AIMessageChunk`s and the message in `values` share an id and a UI merges them.
- Interrupts: a permission pause is LangChain's human-in-the-loop request (`action_requests`,
  `review_configs`) plus our `tool_call_id`s.
- Decisions: `{"decisions": [{"type": "approve" | "edit" | "reject", ...}]}` (LangChain's HITL
  middleware) and agent-chat-ui's older `[{"type": "accept" | "edit" | "ignore" | "response",
  "args": ...}]` become our per-call decisions.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..errors import InvalidResumeError, UserError
from ..events.envelope import Event, EventType

LEAD = "lead"
ALLOWED = ["approve", "edit", "reject"]


def ai_id(message_id: str, index: int, invocation: str = LEAD) -> str:
    return (
        f"{message_id}:ai:{index}"
        if invocation == LEAD
        else f"{message_id}:{invocation}:ai:{index}"
    )


def human(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "human",
        "content": message["content"],
        "id": f"{message['id']}:human",
        "additional_kwargs": {},
        "response_metadata": {},
        "name": None,
    }


def ai(
    msg_id: str, content: str, tool_calls: Sequence[dict[str, Any]] = (), *, chunk: bool = False
) -> dict[str, Any]:
    calls = [
        {"name": c["name"], "args": _args(c.get("arguments")), "id": c["id"], "type": "tool_call"}
        for c in tool_calls
    ]
    out: dict[str, Any] = {
        "type": "AIMessageChunk" if chunk else "ai",
        "content": content,
        "id": msg_id,
        "tool_calls": calls,
        "invalid_tool_calls": [],
        "additional_kwargs": {},
        "response_metadata": {},
        "name": None,
        "usage_metadata": None,
    }
    if chunk:
        out["tool_call_chunks"] = []
    return out


def tool_message(data: Any) -> dict[str, Any]:
    result = data.result
    content = result.data if result.success else (result.error or "")
    if not isinstance(content, str):
        content = json.dumps(content, default=str)
    return {
        "type": "tool",
        "content": content,
        "id": f"tool:{data.tool_call_id}",
        "tool_call_id": data.tool_call_id,
        "name": data.tool,
        "status": "success" if data.success else "error",
        "additional_kwargs": {},
        "response_metadata": {},
    }


def _args(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except ValueError:
            return {"__raw__": raw}
    return raw if raw is not None else {}


def cut_off(event: Event) -> bool:
    """A model call's `llm_complete` written when the run was cancelled during it."""
    return getattr(event.data, "finish_reason", None) == "cancelled"


class MessageBuilder:
    """The LangChain messages of one of our messages, built from its events as they come."""

    def __init__(self, message: dict[str, Any]) -> None:
        self.message_id = message["id"]
        self.messages: list[dict[str, Any]] = [human(message)]
        self.lead_calls = 0  # the lead's completed model calls so far

    @property
    def current_ai_id(self) -> str:
        """The id the lead's model call now streaming will have."""
        return ai_id(self.message_id, self.lead_calls)

    def add(self, event: Event) -> list[dict[str, Any]]:
        """Take one stored event; the messages it adds (may be none)."""
        data = event.data
        invocation = getattr(data, "invocation", None) or LEAD
        added: list[dict[str, Any]] = []
        if event.type == EventType.LLM_COMPLETE and cut_off(event):
            if invocation == LEAD:  # a call cancelled mid-answer writes nothing (as LangGraph)
                self.lead_calls += 1
        elif event.type == EventType.LLM_COMPLETE and invocation == LEAD:
            calls = [c.model_dump() for c in data.tool_calls]  # type: ignore[attr-defined]
            added.append(ai(self.current_ai_id, data.content, calls))  # type: ignore[attr-defined]
            self.lead_calls += 1
        elif event.type == EventType.TOOL_COMPLETE and invocation == LEAD:
            added.append(tool_message(data))
        elif event.type == EventType.COMPLETE and not any(m["type"] == "ai" for m in self.messages):
            response = getattr(data, "response", None)  # a workflow's answer: no lead model call
            if response:
                added.append(ai(ai_id(self.message_id, 0, "answer"), str(response)))
        self.messages.extend(added)
        return added


def message_messages(message: dict[str, Any], events: Sequence[Event]) -> list[dict[str, Any]]:
    builder = MessageBuilder(message)
    for event in events:
        builder.add(event)
    if written_whole(message, builder.messages):
        builder.messages.append(ai(ai_id(message["id"], 0), message["response"]))
    return builder.messages


def written_whole(message: dict[str, Any], built: Sequence[Any]) -> bool:
    """A turn whose answer is in the row but in no model call's event (a state update). A
    cancelled run's row keeps the partial answer for our own API; here, as in LangGraph, a node
    cancelled mid-answer wrote nothing, whether or not its cut-off call was stored."""
    return len(built) == 1 and bool(message.get("response")) and message.get("status") != "cancelled"


# --- interrupts --------------------------------------------------------------------------------


def interrupt_of(pause: dict[str, Any]) -> dict[str, Any]:
    """A permission pause (`waiting_for` / `permission_request` data) as LangChain's HITL
    request."""
    calls = pause.get("calls") or []
    requests = [
        {
            "name": c["tool"],
            "args": c.get("arguments"),
            "tool_call_id": c["tool_call_id"],
            "description": f"Tool execution pending approval\n\nTool: {c['tool']}\nArgs: "
            f"{json.dumps(c.get('arguments'), default=str)}",
        }
        for c in calls
    ]
    configs = [
        {"action_name": name, "allowed_decisions": ALLOWED}
        for name in dict.fromkeys(c["tool"] for c in calls)
    ]
    return {
        "value": {"action_requests": requests, "review_configs": configs},
        "id": pause.get("interrupt_id") or "",
    }


def decisions_of(resume: Any, pause: dict[str, Any]) -> dict[str, Any]:
    """Our decisions (keyed by tool-call id) for a `Command(resume=...)` value: exactly one
    decision per action request, in their order (LangChain v1's HITL middleware), or a mapping
    keyed by tool-call id naming every call. A count that differs is refused (422) before
    anything runs: one `approve` never answers two calls here (`/api/v1` keeps its
    approve-for-all)."""
    calls = pause.get("calls") or []
    ids = [c["tool_call_id"] for c in calls]
    if (
        isinstance(resume, dict)
        and pause.get("interrupt_id") in resume
        and "decisions" not in resume
    ):
        resume = resume[pause["interrupt_id"]]  # keyed by interrupt id
    if isinstance(resume, str):
        resume = [{"type": resume}]  # one bare decision: fits a pause with one call only
    if isinstance(resume, dict) and resume and set(resume) <= set(ids):
        missing = [i for i in ids if i not in resume]
        if missing:
            raise InvalidResumeError(f"no decision for tool call(s) {missing}: one per call")
        return {i: _decision(resume[i]) for i in ids}
    if isinstance(resume, dict) and "decisions" in resume:
        items = resume["decisions"]
    elif isinstance(resume, list):
        items = resume
    elif isinstance(resume, dict) and "type" in resume:
        items = [resume]
    else:
        raise InvalidResumeError(
            'resume must be {"decisions": [{"type": "approve" | "edit" | "reject"}, ...]}, one per '
            'action request, or agent-chat-ui\'s [{"type": "accept" | "edit" | "ignore" | "response"}]'
        )
    if not isinstance(items, list):
        raise InvalidResumeError("resume decisions must be a list, one per action request")
    if len(items) != len(ids):
        raise InvalidResumeError(
            f"{len(items)} decision(s) for {len(ids)} action request(s): give one per request, "
            "in their order"
        )
    return {i: _decision(item) for i, item in zip(ids, items, strict=True)}


def _decision(item: Any) -> dict[str, Any]:
    if not isinstance(item, dict) or not isinstance(item.get("type"), str):
        raise InvalidResumeError('each decision needs a "type": approve, edit or reject')
    kind = item["type"]
    if kind in ("approve", "accept"):
        return {"action": "approve"}
    if kind == "reject":
        return {"action": "deny", "reason": item.get("message")}
    if kind == "ignore":
        return {"action": "deny", "reason": None}
    if kind == "response":
        args = item.get("args")
        return {"action": "deny", "reason": args if isinstance(args, str) else json.dumps(args)}
    if kind == "edit":
        action = item.get("edited_action") or item.get("args") or {}
        args = action.get("args") if isinstance(action, dict) else None
        if not isinstance(args, dict):
            raise InvalidResumeError('an edit needs "edited_action": {"name": ..., "args": {...}}')
        return {"action": "edit", "arguments": args}
    raise InvalidResumeError(f"unknown decision type {kind!r}; use approve, edit or reject")


# --- input -------------------------------------------------------------------------------------


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part if isinstance(part, str) else str(part.get("text", ""))
            for part in content
            if isinstance(part, str) or part.get("type") == "text"
        )
    return "" if content is None else str(content)


def task_text(value: Any) -> str:
    """The user's text in a run's `input`: the last human message of `messages` (as
    `{"role": "user"}` or `{"type": "human"}`), or a plain string."""
    if isinstance(value, str):
        return value
    messages = value.get("messages") if isinstance(value, dict) else None
    if isinstance(messages, dict):
        messages = [messages]
    if isinstance(messages, str):
        return messages
    if not isinstance(messages, list):
        raise UserError('input must carry "messages": [{"role": "user", "content": "..."}]')
    for message in reversed(messages):
        if isinstance(message, str):
            return message
        if isinstance(message, dict) and (
            message.get("role") in ("user", "human") or message.get("type") == "human"
        ):
            return text_of(message.get("content"))
    raise UserError('input has no user message: send {"role": "user", "content": "..."}')


def turns_of(values: Any) -> list[tuple[str, str]]:
    """`values.messages` as finished turns: each user message with the text of the assistant
    messages after it (a thread's state update)."""
    messages = values.get("messages") if isinstance(values, dict) else None
    if isinstance(messages, dict):
        messages = [messages]
    if not isinstance(messages, list) or not messages:
        raise UserError(
            'values must be {"messages": [{"role": "user", ...}, {"role": "assistant", ...}]}'
        )
    turns: list[list[str]] = []
    for message in messages:
        if not isinstance(message, dict):
            raise UserError("each message must be an object with a role or a type")
        kind = message.get("role") or message.get("type")
        text = text_of(message.get("content"))
        if kind in ("user", "human"):
            turns.append([text, ""])
        elif kind in ("assistant", "ai") and turns:
            turns[-1][1] = (turns[-1][1] + "\n\n" + text).strip()
        else:
            raise UserError(
                "a state update adds turns: a user message first, then the assistant's answer "
                f"(got {kind!r} {'first' if not turns else ''})".replace(" )", ")")
            )
    return [(content, response) for content, response in turns]
