"""Two users on one server, through the real `langgraph_sdk` client over a real socket (issue 34).

- Thread ids are a space per user: Bob may create a thread with the id Alice's thread has and
  gets his own (before: 409, which told him hers existed and let anyone claim an id first).
  Every route with that id then reaches his thread for him and hers for her, and every answer
  shows the id they chose.
- A saved assistant is its creator's: to another user it is a 404 on every route, and absent
  from searches; the built-in assistants stay shared and read-only.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import pytest_asyncio
from browser_helpers import serving
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from .conftest import REFERENCE_URL, _database
from .helpers import human, last_ai, text_of
from .test_platform import WEBHOOKS, _receiver, _until
from .toy import ANSWER, toy_route

pytestmark = pytest.mark.skipif(bool(REFERENCE_URL), reason="artifactflow's users (auth), not protocol")


@dataclass
class Two:
    url: str
    alice: LangGraphClient
    bob: LangGraphClient
    alice_headers: dict[str, str]
    bob_headers: dict[str, str]
    af: Any
    bob_id: str
    carol: LangGraphClient


@pytest_asyncio.fixture(params=["sqlite", "postgres"])
async def two(request: pytest.FixtureRequest, llm_env: Any, make_client: Any) -> AsyncIterator[Two]:
    from artifactflow.api.app import create_app

    llm_env.route(toy_route)
    async with _database(request.param) as database:
        af = await make_client(yaml_text=database + "auth:\n  enabled: true\n" + WEBHOOKS)
        _, alice = await af.admin.store.create_token("alice")
        bob_id, bob = await af.admin.store.create_token("bob")
        _, carol = await af.admin.store.create_token("carol")
        async with serving(create_app(client=af)) as url:
            yield Two(
                url,
                get_client(url=url, api_key=alice),
                get_client(url=url, api_key=bob),
                {"Authorization": f"Bearer {alice}"},
                {"Authorization": f"Bearer {bob}"},
                af,
                bob_id,
                get_client(url=url, api_key=carol),
            )


async def test_two_users_each_hold_a_thread_of_the_same_id(two: Two) -> None:
    alice, bob = two.alice, two.bob
    x = str(uuid.uuid4())
    hers = await alice.threads.create(thread_id=x, metadata={"who": "alice"})
    await alice.runs.wait(x, "lead_agent", input=human("hello from alice"))
    alice_state = await alice.threads.get_state(x)

    # Bob's create of the same id: his own thread, not a 409 that says hers exists
    mine = await bob.threads.create(thread_id=x, metadata={"who": "bob"})
    assert mine["thread_id"] == x and mine["metadata"] == {"who": "bob"}
    assert mine["values"] == {} and hers["metadata"] == {"who": "alice"}
    # within his space, if_exists holds: raise is a 409, do_nothing gives his thread back
    again = await httpx.AsyncClient(base_url=two.url, headers=two.bob_headers).post(
        "/threads", json={"thread_id": x}
    )
    assert again.status_code == 409, again.text
    same = await bob.threads.create(thread_id=x, if_exists="do_nothing")
    assert same["thread_id"] == x and same["metadata"] == {"who": "bob"}

    # a run on it: his thread, shown by his id everywhere
    answer = await bob.runs.wait(x, "lead_agent", input=human("hello from bob"))
    assert text_of(last_ai(answer)) == ANSWER
    state = await bob.threads.get_state(x)
    assert state["checkpoint"]["thread_id"] == x
    assert [m["content"] for m in state["values"]["messages"] if m["type"] == "human"] == ["hello from bob"]
    history = await bob.threads.get_history(x, limit=100)
    assert history and {h["checkpoint"]["thread_id"] for h in history} == {x}
    runs = await bob.runs.list(x)
    assert len(runs) == 1 and runs[0]["thread_id"] == x
    run = await bob.runs.get(x, runs[0]["run_id"])
    assert run["thread_id"] == x and run["status"] == "success"
    assert (await bob.threads.get(x))["metadata"] == {"who": "bob", "assistant_id": "lead_agent",
                                                       "graph_id": "lead_agent"}
    parts = [p async for p in bob.runs.stream(x, "lead_agent", input=human("stream please"),
                                                stream_mode=["values"])]
    values = [p.data for p in parts if p.event == "values"]
    assert values and len(values[-1]["messages"]) == 4
    async with _receiver() as receiver:  # its webhook, sent when it ends, names his id too
        background = await bob.runs.create(x, "lead_agent", input=human("and once more"),
                                           webhook=receiver.url)
        assert background["thread_id"] == x
        joined = await bob.runs.join(x, background["run_id"])
        assert len(joined["messages"]) == 6
        await _until(lambda: receiver.hits)
        assert receiver.hits[0][0]["thread_id"] == x
    async with httpx.AsyncClient(base_url=two.url, headers=two.bob_headers) as http:
        created = await http.post(f"/threads/{x}/runs", json={"assistant_id": "lead_agent",
                                                               "input": human("where am I")})
        assert created.headers["Content-Location"].startswith(f"/threads/{x}/runs/")
        await bob.runs.join(x, created.json()["run_id"])

    # lists and searches show his id; hers stays out of his, his out of hers
    found = await bob.threads.search(limit=100)
    assert [(t["thread_id"], t["metadata"]["who"]) for t in found] == [(x, "bob")]
    assert [t["metadata"]["who"] for t in await bob.threads.search(ids=[x])] == ["bob"]
    assert [t["metadata"]["who"] for t in await alice.threads.search(limit=100)] == ["alice"]
    copy = await bob.threads.copy(x)
    assert copy["thread_id"] != x
    assert len((await bob.threads.get_state(copy["thread_id"]))["values"]["messages"]) == 8

    # a cron on his thread shows his id, and a search by it finds it
    cron = await bob.crons.create_for_thread(x, "lead_agent", schedule="0 0 1 1 *", input=human("yearly"))
    assert cron["thread_id"] == x
    assert [c["cron_id"] for c in await bob.crons.search(thread_id=x)] == [cron["cron_id"]]
    assert await alice.crons.search(thread_id=x) == []
    await bob.crons.delete(cron["cron_id"])

    # Alice's thread X never changed; deleting his leaves hers
    assert await alice.threads.get_state(x) == alice_state
    assert (await alice.threads.get(x))["metadata"]["who"] == "alice"
    assert len(await alice.runs.list(x)) == 1
    await bob.threads.delete(x)
    assert (await alice.threads.get(x))["metadata"]["who"] == "alice"
    async with httpx.AsyncClient(base_url=two.url, headers=two.bob_headers) as http:
        assert (await http.get(f"/threads/{x}")).status_code == 404
    # and a thread made by a run (`if_not_exists="create"`) on an id Alice holds is his too
    await bob.runs.wait(x, "lead_agent", input=human("made by a run"), if_not_exists="create")
    made = await bob.threads.get(x)
    assert made["thread_id"] == x and "who" not in made["metadata"]
    assert (await alice.threads.get(x))["metadata"]["who"] == "alice"


async def test_a_derived_key_taken_on_purpose_moves_one_step_on(two: Two) -> None:
    """Carol, knowing Bob's user id, takes the key Bob's thread X would get while Alice holds
    X: Bob's X goes to the next key of his chain, still shown as X, and Carol's stays hers."""
    from artifactflow.protocol.thread_ids import chain

    x = str(uuid.uuid4())
    await two.alice.threads.create(thread_id=x, metadata={"who": "alice"})
    first, second = chain(x, two.bob_id)[1:]
    await two.carol.threads.create(thread_id=first, metadata={"who": "carol"})
    his = await two.bob.threads.create(thread_id=x, metadata={"who": "bob"})
    assert his["thread_id"] == x and his["metadata"] == {"who": "bob"}
    async with httpx.AsyncClient(base_url=two.url, headers=two.bob_headers) as http:
        # /api/v1 names conversations by key: his is the second derived one
        assert (await http.get(f"/api/v1/conversations/{second}")).status_code == 200
        assert (await http.get(f"/api/v1/conversations/{first}")).status_code == 404
    await two.bob.runs.wait(x, "lead_agent", input=human("still mine"))
    assert [t["metadata"]["who"] for t in await two.bob.threads.search(ids=[x])] == ["bob"]
    assert (await two.carol.threads.get(first))["metadata"] == {"who": "carol"}
    assert (await two.alice.threads.get(x))["metadata"] == {"who": "alice"}


async def test_saved_assistants_are_their_creators(two: Two) -> None:
    alice, bob = two.alice, two.bob
    mine = await alice.assistants.create("lead_agent", name="alice's secret helper",
                                         metadata={"owner": "alice"})
    a = mine["assistant_id"]
    await alice.assistants.update(a, metadata={"v": 2})
    async with httpx.AsyncClient(base_url=two.url, headers=two.bob_headers, timeout=60) as http:
        answers = {
            "get": await http.get(f"/assistants/{a}"),
            "patch": await http.patch(f"/assistants/{a}", json={"name": "bob's now"}),
            "versions": await http.post(f"/assistants/{a}/versions", json={}),
            "latest": await http.post(f"/assistants/{a}/latest", json={"version": 1}),
            "graph": await http.get(f"/assistants/{a}/graph"),
            "schemas": await http.get(f"/assistants/{a}/schemas"),
            "run": await http.post("/runs/wait", json={"assistant_id": a, "input": human("hi")}),
            "chat": await http.post("/api/v1/chat", json={"content": "hi", "assistant": a}),
            "card": await http.get("/.well-known/agent-card.json", params={"assistant_id": a}),
            "delete": await http.delete(f"/assistants/{a}"),
        }
        wrong = {k: (r.status_code, r.text[:200]) for k, r in answers.items() if r.status_code != 404}
        assert wrong == {}
        assert all("secret" not in r.text for r in answers.values())
        # its id stays taken (a 409, never its content), do_nothing included
        taken = await http.post("/assistants", json={"graph_id": "lead_agent", "assistant_id": a,
                                                      "if_exists": "do_nothing"})
        assert taken.status_code == 409 and "secret" not in taken.text
        listed = (await http.post("/assistants/search", json={"limit": 100})).json()
        assert a not in [v["assistant_id"] for v in listed]
        assert (await http.post("/assistants/count", json={})).json() == len(listed)
        # built-in assistants: still visible to all and read-only
        builtin = listed[0]["assistant_id"]
        assert listed[0]["metadata"]["built_in"] is True
        assert (await http.patch(f"/assistants/{builtin}", json={"name": "x"})).status_code == 409
        assert (await http.delete(f"/assistants/{builtin}")).status_code == 409
        assert (await http.get("/api/v1/assistants")).status_code == 200
        assert a not in [v["assistant_id"] for v in (await http.get("/api/v1/assistants")).json()["assistants"]]
    # Bob's own assistant is his, hidden from Alice; Alice's is whole
    his = await bob.assistants.create("lead_agent", name="bob's")
    assert his["assistant_id"] not in [v["assistant_id"] for v in await alice.assistants.search(limit=100)]
    assert a in [v["assistant_id"] for v in await alice.assistants.search(limit=100)]
    got = await alice.assistants.get(a)
    assert got["name"] == "alice's secret helper" and got["version"] == 2
    assert len(await alice.assistants.get_versions(a)) == 2
    answer = await alice.runs.wait(None, a, input=human("hello"))
    assert text_of(last_ai(answer)) == ANSWER
    await alice.assistants.delete(a)
