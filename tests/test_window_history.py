"""Conversation history condensed once, stored and reused (SQLite and PostgreSQL)."""

from __future__ import annotations

from typing import Any

from artifactflow.core.conversations import ConversationManager
from artifactflow.core.store.repository import AppStore
from artifactflow.core.window.history import HISTORY_SYSTEM, conversation_history, plan_history
from artifactflow.core.window.history_store import HistorySummaries


class Summarizer:
    def __init__(self) -> None:
        self.requests: list[list[dict[str, Any]]] = []

    async def __call__(self, messages: list[dict[str, Any]]) -> str:
        self.requests.append(messages)
        return f"SUMMARY-{len(self.requests)}: the user asked about rainfall; figures were given"


async def say(manager: ConversationManager, conversation_id: str, n: int, **kw: Any) -> dict[str, Any]:
    message = await manager.add_message(conversation_id, f"question {n}: " + "why " * 150, thread_id=f"t{n}-{conversation_id}", **kw)
    await manager.store.update_message(message["id"], status="completed", response=f"answer {n}: " + "because " * 150)
    return message


async def history_for(manager: ConversationManager, summaries: HistorySummaries, parent_id: str,
                      summarize: Summarizer) -> tuple[list[list[str]], dict[str, Any] | None]:
    path = await manager.path_to(parent_id)
    return await conversation_history(path, summaries=summaries, summarize=summarize, budget=3000,
                                      keep_recent=4, summary_tokens=300, window=8192, model="m")


async def test_long_conversation_condensed_once_and_reused(store: AppStore):
    manager = ConversationManager(store)
    summaries = HistorySummaries(store)
    conversation = await manager.start_conversation()
    cid = conversation["id"]
    summarize = Summarizer()
    messages = [await say(manager, cid, n) for n in range(1, 11)]
    turns, event = await history_for(manager, summaries, messages[-1]["id"], summarize)
    # ten messages of ~450 tokens each: over the 3,000-token budget → one summary call
    assert len(summarize.requests) == 1 and event is not None
    assert turns[0][0] == "system" and "SUMMARY-1" in turns[0][1] and "(8 messages)" in turns[0][1]
    assert [t[1].split(":")[0] for t in turns[1:]] == ["question 9", "answer 9", "question 10", "answer 10"]
    assert event["tokens_after"] < event["tokens_before"]
    stored = await summaries.for_conversation(cid)
    assert [(r["message_id"], r["covers"]) for r in stored] == [(messages[7]["id"], 8)]
    # the next message on the branch reuses the stored summary: no call
    messages.append(await say(manager, cid, 11))
    turns, event = await history_for(manager, summaries, messages[-1]["id"], summarize)
    assert event is None and len(summarize.requests) == 1 and "SUMMARY-1" in turns[0][1]
    assert len(turns) == 1 + 2 * 3
    # a few more messages later the budget is crossed again: the new summary extends the old
    for n in range(12, 16):
        messages.append(await say(manager, cid, n))
    turns, event = await history_for(manager, summaries, messages[-1]["id"], summarize)
    assert len(summarize.requests) == 2 and event is not None
    sent = summarize.requests[1]
    assert sent[0]["content"] == HISTORY_SYSTEM and "SUMMARY-1" in sent[1]["content"]
    assert "question 9" in sent[1]["content"] and "question 8:" not in sent[1]["content"]
    assert "SUMMARY-2" in turns[0][1]


async def test_forks_use_only_summaries_on_their_own_path(store: AppStore):
    manager = ConversationManager(store)
    summaries = HistorySummaries(store)
    cid = (await manager.start_conversation())["id"]
    summarize = Summarizer()
    messages = [await say(manager, cid, n) for n in range(1, 11)]
    await history_for(manager, summaries, messages[-1]["id"], summarize)  # covers 1..8
    # a fork from message 5: the summary covering 1..8 is not on its path
    fork = await say(manager, cid, 99, parent_id=messages[4]["id"])
    path = await manager.path_to(fork["id"])
    assert await summaries.latest_on_path([m["id"] for m in path]) is None
    turns, _ = await history_for(manager, summaries, fork["id"], summarize)
    assert not any("SUMMARY-1" in t[1] for t in turns)
    # a fork from message 9 goes through message 8: it reuses the stored summary
    fork2 = await say(manager, cid, 98, parent_id=messages[8]["id"])
    calls = len(summarize.requests)
    turns, event = await history_for(manager, summaries, fork2["id"], summarize)
    assert event is None and len(summarize.requests) == calls and "SUMMARY-1" in turns[0][1]
    # deleting the conversation deletes its summaries (foreign key cascade)
    await manager.delete(cid)
    assert await summaries.for_conversation(cid) == []


async def test_same_path_stored_twice_keeps_one_row(store: AppStore):
    manager = ConversationManager(store)
    summaries = HistorySummaries(store)
    cid = (await manager.start_conversation())["id"]
    message = await say(manager, cid, 1)
    await summaries.put(conversation_id=cid, message_id=message["id"], covers=1, summary="a")
    await summaries.put(conversation_id=cid, message_id=message["id"], covers=1, summary="b")
    assert [r["summary"] for r in await summaries.for_conversation(cid)] == ["a"]


def test_paused_messages_are_never_folded_into_a_summary():
    path = [{"id": f"m{n}", "conversation_id": "c", "content": "q " * 400, "response": "a " * 400,
             "status": "completed"} for n in range(10)]
    path[3]["status"] = "waiting"  # its answer may still come
    plan = plan_history(path, None, budget=1000, keep_recent=2, summary_tokens=100)
    assert [m["id"] for m in plan.fold] == ["m0", "m1", "m2"]
    small = plan_history(path[:2], None, budget=100_000, keep_recent=2, summary_tokens=100)
    assert small.fold == [] and len(small.turns) == 4
