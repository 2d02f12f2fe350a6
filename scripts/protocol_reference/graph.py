"""A toy graph for LangGraph's local dev server (`langgraph dev`), the reference the Agent
Protocol suite (tests/agent_protocol/) is checked against by `scripts/protocol-reference-check`.

It behaves like artifactflow under the suite's scripted model, offline and deterministic:
- "write a note: TEXT" -> the chat node calls `write_note(text=TEXT)`; the tool node asks with
  one `interrupt()` in LangChain's human-in-the-loop form (`action_requests`, `review_configs`)
  and takes `{"decisions": [{"type": "approve" | "edit" | "reject", ...}]}`;
- "write notes: A; B" -> two `write_note` calls in one turn (one interrupt, two requests);
- "slow ..." -> a long answer streamed slowly (so a test can cancel or double-text it);
- anything else -> "Hello from the toy graph." streamed token by token.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

ANSWER = "Hello from the toy graph."
NOTE_PREFIX = "write a note:"
NOTES_PREFIX = "write notes:"


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    return " ".join(part.get("text", "") for part in content if isinstance(part, dict))


class ToyChatModel(BaseChatModel):
    """A chat model that answers by rule and streams its answer in word chunks."""

    @property
    def _llm_type(self) -> str:
        return "toy"

    def _reply(self, messages: list[BaseMessage]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage):
            return AIMessage(content=f"Noted: {_text(last)}")
        text = _text(last).strip()
        if text.lower().startswith(NOTES_PREFIX):
            notes = [n.strip() for n in text[len(NOTES_PREFIX):].split(";")]
            return AIMessage(content="", tool_calls=[
                {"name": "write_note", "args": {"text": n}, "id": f"call_{i}_{abs(hash(n)) % 10**8}"}
                for i, n in enumerate(notes)
            ])
        if text.lower().startswith(NOTE_PREFIX):
            note = text[len(NOTE_PREFIX):].strip()
            return AIMessage(
                content="",
                tool_calls=[{"name": "write_note", "args": {"text": note}, "id": f"call_{abs(hash(note)) % 10**8}"}],
            )
        if text.lower().startswith("slow"):
            return AIMessage(content=" ".join(f"word{i}" for i in range(40)))
        return AIMessage(content=ANSWER)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._reply(messages))])

    async def _agenerate(self, messages: list[BaseMessage], stop: Any = None,
                         run_manager: Any = None, **kwargs: Any) -> ChatResult:
        if _text(messages[-1]).strip().lower().startswith("slow"):
            async for _ in self._astream(messages):
                pass
        return self._generate(messages)

    def _chunks(self, messages: list[BaseMessage]) -> Iterator[AIMessageChunk]:
        reply = self._reply(messages)
        if reply.tool_calls:
            yield AIMessageChunk(content="", tool_call_chunks=[
                {"name": c["name"], "args": json.dumps(c["args"]), "id": c["id"], "index": i}
                for i, c in enumerate(reply.tool_calls)
            ])
            return
        for i, word in enumerate(str(reply.content).split(" ")):
            yield AIMessageChunk(content=word if i == 0 else " " + word)

    def _stream(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                **kwargs: Any) -> Iterator[ChatGenerationChunk]:
        for piece in self._chunks(messages):
            chunk = ChatGenerationChunk(message=piece)
            if run_manager:
                run_manager.on_llm_new_token(str(piece.content), chunk=chunk)
            yield chunk

    async def _astream(self, messages: list[BaseMessage], stop: Any = None,
                       run_manager: Any = None, **kwargs: Any) -> AsyncIterator[ChatGenerationChunk]:
        slow = _text(messages[-1]).strip().lower().startswith("slow")
        for piece in self._chunks(messages):
            chunk = ChatGenerationChunk(message=piece)
            if run_manager:
                await run_manager.on_llm_new_token(str(piece.content), chunk=chunk)
            if slow:
                await asyncio.sleep(0.1)  # a run long enough to cancel or double-text
            yield chunk


model = ToyChatModel()
NOTES: list[str] = []


async def chat(state: MessagesState) -> dict[str, Any]:
    return {"messages": [await model.ainvoke(state["messages"])]}


def tools(state: MessagesState) -> dict[str, Any]:
    last = state["messages"][-1]
    assert isinstance(last, AIMessage)
    calls = last.tool_calls
    response = interrupt({
        "action_requests": [
            {"name": c["name"], "args": c["args"], "description": f"Tool {c['name']} needs approval",
             "id": c["id"]}
            for c in calls
        ],
        "review_configs": [
            {"action_name": c["name"], "allowed_decisions": ["approve", "edit", "reject"]}
            for c in calls
        ],
    })
    decisions = response.get("decisions", []) if isinstance(response, dict) else []
    if len(decisions) != len(calls):  # as LangChain's HumanInTheLoopMiddleware checks
        raise ValueError(f"{len(decisions)} decision(s) for {len(calls)} action request(s)")
    results = []
    for call, decision in zip(calls, decisions, strict=False):
        kind = decision.get("type")
        if kind == "approve":
            NOTES.append(call["args"]["text"])
            content = f"saved note {call['args']['text']!r}"
        elif kind == "edit":
            args = decision.get("edited_action", {}).get("args", call["args"])
            NOTES.append(args["text"])
            content = f"saved note {args['text']!r}"
        else:
            content = f"the user rejected the call: {decision.get('message', '')}"
        results.append(ToolMessage(content=content, tool_call_id=call["id"], name=call["name"]))
    return {"messages": results}


def route(state: MessagesState) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


builder = StateGraph(MessagesState)
builder.add_node("chat", chat)
builder.add_node("tools", tools)
builder.add_edge(START, "chat")
builder.add_conditional_edges("chat", route, ["tools", END])
builder.add_edge("tools", "chat")
graph = builder.compile()
