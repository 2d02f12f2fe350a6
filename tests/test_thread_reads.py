"""Reads of a conversation that cost O(page): the head, pages of the active branch and pages of
conversations with their active message, on SQLite and PostgreSQL (the `store` fixture).

The speed claim (a 1,000-message thread opens as fast as a 10-message one) is printed by
`benchmarks/thread_reads.py`; here the pages must be exactly the right messages."""

from __future__ import annotations

from typing import Any

import pytest

from artifactflow.core.store.conversation_records import new_conversation
from artifactflow.core.store.thread_reads import branch_page, conversation_page, thread_head


async def chain(store: Any, count: int, *, branch_at: int | None = None) -> tuple[str, list[str]]:
    """A conversation of `count` messages, each the child of the one before, the last active.
    With `branch_at`, a sibling of message `branch_at` is added first (not on the branch)."""
    conversation = new_conversation(title="t")
    ids: list[str] = []
    parent = None
    for n in range(count):
        row = await store.add_message(
            conversation_id=conversation["id"], content=f"q{n}", parent_id=parent,
            new_conversation=conversation if n == 0 else None, activate="t",
        )
        await store.update_message(row["id"], status="completed", response=f"a{n}")
        if branch_at is not None and n == branch_at:
            await store.add_message(
                conversation_id=conversation["id"], content="side", parent_id=parent
            )
        ids.append(row["id"])
        parent = row["id"]
    return conversation["id"], ids


async def test_the_head_is_the_conversation_and_its_active_message(store):
    cid, ids = await chain(store, 5)
    head = await thread_head(store, cid)
    assert head is not None and head.conversation["id"] == cid
    assert head.active is not None and head.active["id"] == ids[-1]
    assert (head.active["content"], head.active["response"]) == ("q4", "a4")
    assert await thread_head(store, "no-such-conversation") is None


async def test_branch_pages_walk_the_active_branch_newest_first_to_the_root(store):
    cid, ids = await chain(store, 12, branch_at=3)
    seen: list[str] = []
    before = None
    pages = 0
    while True:
        page = await branch_page(store, cid, limit=5, before=before)
        assert page is not None
        seen += [m["id"] for m in page.messages]
        pages += 1
        if page.before is None:
            break
        before = page.before
    assert seen == list(reversed(ids))  # the side message is on no page
    assert pages == 3
    first = await branch_page(store, cid, limit=3)
    assert first is not None and [m["response"] for m in first.messages] == ["a11", "a10", "a9"]


async def test_a_page_ending_exactly_at_the_root_says_there_is_no_more(store):
    cid, ids = await chain(store, 4)
    page = await branch_page(store, cid, limit=4)
    assert page is not None and [m["id"] for m in page.messages] == list(reversed(ids))
    assert page.before is None


async def test_bad_page_requests_are_refused_and_change_nothing(store):
    cid, ids = await chain(store, 3)
    other, _ = await chain(store, 2)
    with pytest.raises(ValueError, match="limit must be between 1 and 1000"):
        await branch_page(store, cid, limit=0)
    with pytest.raises(ValueError, match="is not in conversation"):
        await branch_page(store, other, before=ids[0])
    with pytest.raises(ValueError, match="offset must be"):
        await conversation_page(store, offset=-1)
    assert await branch_page(store, "missing") is None
    page = await branch_page(store, cid)
    assert page is not None and len(page.messages) == 3


async def test_conversation_pages_carry_each_active_message(store):
    first, first_ids = await chain(store, 3)
    second, second_ids = await chain(store, 2)
    empty = await store.create_conversation(title="empty")
    heads = await conversation_page(store, limit=10)
    by_id = {h.conversation["id"]: h for h in heads}
    assert by_id[empty["id"]].active is None
    assert by_id[first].active is not None and by_id[first].active["id"] == first_ids[-1]
    assert by_id[second].active is not None and by_id[second].active["id"] == second_ids[-1]
    assert [h.conversation["id"] for h in heads] == [empty["id"], second, first]  # newest first
    assert len(await conversation_page(store, limit=1)) == 1


async def test_the_api_serves_branch_pages_of_real_runs(make_client, llm):
    """`GET /api/v1/conversations/{id}/branch`: pages of a conversation run through the
    engine, newest first, `before` to the root; bad input is a 422/404 and changes nothing."""
    import httpx
    from scripted_llm import Text

    from artifactflow import Task
    from artifactflow.api.app import create_app

    client = await make_client()
    for n in range(3):
        llm.script(Text(f"answer {n}"))
    first = await client.run("question 0")
    second = await client.run(Task("question 1", conversation_id=first.conversation_id))
    third = await client.run(Task("question 2", conversation_id=first.conversation_id))
    app = create_app(client=client)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://testserver"
    ) as http:
        url = f"/api/v1/conversations/{first.conversation_id}/branch"
        page = (await http.get(url, params={"limit": 2})).json()
        assert [m["id"] for m in page["messages"]] == [third.message_id, second.message_id]
        assert [m["response"] for m in page["messages"]] == ["answer 2", "answer 1"]
        assert page["before"] == second.message_id
        rest = (await http.get(url, params={"limit": 2, "before": page["before"]})).json()
        assert [m["id"] for m in rest["messages"]] == [first.message_id] and rest["before"] is None
        assert (await http.get(url, params={"limit": 0})).status_code == 422
        wrong = await http.get(url, params={"before": "not-a-message"})
        assert wrong.status_code == 422 and "is not in conversation" in wrong.json()["error"]["message"]
        missing = await http.get("/api/v1/conversations/nope/branch")
        assert missing.status_code == 404
    again = await client.conversations.branch(first.conversation_id, limit=5)
    assert [m["id"] for m in again.messages] == [third.message_id, second.message_id, first.message_id]


async def test_usage_sums_equal_the_fold_over_every_message(store):
    """`usage_sums` (the database's sum, one row back) gives what `conversation_usage` over
    the messages' stored metrics gives: priced, unpriced, unreported and metric-less messages,
    and the one left out."""
    from artifactflow.core.metrics import conversation_usage
    from artifactflow.core.run.maintenance import with_others
    from artifactflow.core.store.thread_reads import usage_sums

    cid, ids = await chain(store, 6)
    figures = [
        {"llm_calls": 2, "tokens": {"prompt": 100, "completion": 20, "total": 120},
         "cost_usd": 0.0125, "cost_complete": True},
        {"llm_calls": 1, "tokens": {"prompt": 7, "completion": 3, "total": 10},
         "cost_usd": None, "cost_complete": False},  # a call without a price
        {"llm_calls": 1, "tokens": {"prompt": None, "completion": None, "total": None},
         "cost_usd": 0.5, "cost_complete": True},  # the server sent no usage
        {"llm_calls": 3, "tokens": {"prompt": 1, "completion": 1, "total": 2}},  # older rows
        None,  # no metrics yet (running)
        {"llm_calls": 1, "tokens": {"prompt": 9000, "completion": 9, "total": 9009},
         "cost_usd": 0.25, "cost_complete": True},  # the message whose run ends
    ]
    for message_id, metrics in zip(ids, figures, strict=True):
        if metrics is not None:
            await store.update_message(message_id, metrics=metrics)
    everyone = [{"metrics": m} for m in figures]
    sums = await usage_sums(store, cid, excluding=ids[-1])
    assert (sums.messages, sums.total, sums.priced, sums.unpriced) == (5, 132, 2, 2)
    assert with_others(conversation_usage([everyone[-1]]), sums) == conversation_usage(everyone)
    only = await usage_sums(store, cid, excluding="no-such-message")
    assert only.messages == 6 and only.cost_usd == pytest.approx(0.7625)
    empty = await usage_sums(store, "no-such-conversation", excluding=ids[0])
    assert (empty.messages, empty.total, empty.cost_usd) == (0, 0, 0.0)
    if store.is_sqlite:  # asked at every run's end: on the writer, no SQLAlchemy statement
        import sqlalchemy as sa

        from artifactflow.core.store.thread_reads import UsageSums, _usage_query

        statements: list[str] = []

        def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            statements.append(statement)

        sa.event.listen(store.engine.sync_engine, "before_cursor_execute", seen)
        try:
            fast = await usage_sums(store, cid, excluding=ids[-1])
        finally:
            sa.event.remove(store.engine.sync_engine, "before_cursor_execute", seen)
        assert statements == []
        query = _usage_query("sqlite").params(cid=cid, skip=ids[-1])
        slow = UsageSums(*(await store.fetch_rows(query))[0].values())
        assert fast == sums == slow
