"""A served app with auth on, two users, and one of each of the first user's resources, for the
suites that call every route (tests/test_route_fuzz.py, tests/test_cross_user_matrix.py).

Alice owns: a thread with a finished run, a thread paused on an approval of the CONFIRM tool
`write_note` (its effect is `toy.NOTES`), a chat message that made an artifact, a memory in
each scope (global, project, conversation), a store item, a knowledge document, a cron and a
workflow run. Every one of them carries `MARK`, so a response that holds it leaked her data.
`snapshot` is everything she can see, without the fields that change by themselves (times).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from agent_protocol.helpers import approve, human
from agent_protocol.toy import NOTES, toy_route, write_note
from browser_helpers import serving
from conftest import write_agent
from scripted_llm import Call, ScriptedLLM, ToolCalls
from waiting import wait_until
from wf_helpers import workflow_config

from artifactflow import Client, load_settings
from artifactflow.api.app import create_app

MARK = "alicesecret7f3a"  # in every resource of Alice's: found in an answer to Bob, a leak
FLOW = """
name: flow
input: {type: object, properties: {topic: {type: string}}}
nodes:
  - {id: start, role: start}
  - {id: ask, role: linear, kind: agent, agent: worker, instruction: "Summarise {{ input.topic }}"}
  - {id: done, role: exit}
edges:
  - {from: start, to: ask}
  - {from: ask, to: done}
"""


def route(request: dict[str, Any]) -> Any:
    """toy.py's rules, plus "make an artifact" -> a `create_artifact` call."""
    last = (request.get("messages") or [{}])[-1]
    if last.get("role") == "user" and "make an artifact" in str(last.get("content")):
        return ToolCalls([Call("create_artifact", {"id": "report", "title": "Report",
                                                   "content": f"report {MARK}"})])
    return toy_route(request)


@dataclass
class World:
    url: str
    client: Client
    alice: dict[str, str]  # headers
    bob: dict[str, str]
    alice_id: str
    ids: dict[str, str] = field(default_factory=dict)  # thread_id, paused_thread_id, run_id, ...
    llm: ScriptedLLM | None = None


async def _ok(answer: httpx.Response, *codes: int) -> Any:
    assert answer.status_code in (codes or (200, 201, 202, 204)), (answer.request.url, answer.text)
    return answer.json() if answer.content else None


async def _settled(http: httpx.AsyncClient, headers: dict[str, str], message_id: str) -> None:
    async def done() -> bool:
        status = (await http.get(f"/api/v1/messages/{message_id}", headers=headers)).json()["status"]
        return status not in ("pending", "running")

    await wait_until(done, what=f"message {message_id} to settle")


async def _populate(http: httpx.AsyncClient, world: World, tmp_path: Path) -> None:
    a, ids = world.alice, world.ids
    ids["assistant_id"] = (await _ok(await http.post("/assistants/search", json={}, headers=a)))[0]["assistant_id"]
    saved = await _ok(await http.post("/assistants", headers=a, json={
        "graph_id": "agent", "name": f"helper {MARK}", "metadata": {"m": MARK}}))
    ids["saved_assistant_id"] = saved["assistant_id"]  # hers: a 404 to anyone else (issue 34)
    for key, text in (("thread_id", "hello"), ("paused_thread_id", "write a note: milk")):
        thread = await _ok(await http.post("/threads", json={"metadata": {"m": MARK}}, headers=a))
        ids[key] = thread["thread_id"]
        await _ok(await http.post(f"/threads/{ids[key]}/runs/wait", headers=a,
                                  json={"assistant_id": ids["assistant_id"], "input": human(f"{text} {MARK}")}))
        run = (await _ok(await http.get(f"/threads/{ids[key]}/runs", headers=a)))[0]
        ids[key.replace("thread_id", "run_id")] = run["run_id"]
    paused = await _ok(await http.get(f"/threads/{ids['paused_thread_id']}", headers=a))
    assert paused["status"] == "interrupted", paused
    branch = await _ok(await http.get(f"/api/v1/conversations/{ids['paused_thread_id']}/branch", headers=a))
    ids["paused_message_id"] = branch["messages"][0]["id"]
    state = await _ok(await http.get(f"/threads/{ids['thread_id']}/state", headers=a))
    ids["checkpoint_id"] = state["checkpoint"]["checkpoint_id"]

    chat = await _ok(await http.post("/api/v1/chat", json={"content": f"make an artifact {MARK}"}, headers=a))
    ids["message_id"], ids["conversation_id"] = chat["message_id"], chat["conversation_id"]
    await _settled(http, a, ids["message_id"])
    ids["artifact_id"] = "report"
    await _ok(await http.get(f"/api/v1/conversations/{ids['conversation_id']}/artifacts/report", headers=a))

    for body in ({"text": f"global {MARK}"}, {"text": f"project {MARK}", "scope": "project", "project": "falcon"},
                 {"text": f"chat {MARK}", "scope": "conversation", "conversation_id": ids["conversation_id"]}):
        memory = await _ok(await http.post("/api/v1/memories", json=body, headers=a))
        ids.setdefault("memory_id", memory["id"])
        ids[f"memory_{body.get('scope', 'global')}"] = memory["id"]
    await _ok(await http.put("/store/items", headers=a,
                             json={"namespace": ["notes"], "key": "k1", "value": {"text": MARK}}))
    doc = tmp_path / "handbook.md"
    doc.write_text(f"# Handbook\n\nThe vault code is {MARK}.\n", encoding="utf-8")
    await world.client.knowledge.add([doc], user_id=world.alice_id)
    cron = await _ok(await http.post(f"/threads/{ids['thread_id']}/runs/crons", headers=a, json={
        "assistant_id": ids["assistant_id"], "schedule": "0 0 1 1 *", "input": human(f"yearly {MARK}"),
        "metadata": {"m": MARK}}))
    ids["cron_id"] = cron["cron_id"]
    flow = await _ok(await http.post("/api/v1/workflows/flow/runs", json={"input": {"topic": MARK}}, headers=a))
    ids["workflow_message_id"] = flow["message_id"]
    await _settled(http, a, flow["message_id"])
    ids["name"] = "flow"


@asynccontextmanager
async def _database(backend: str) -> AsyncIterator[str]:
    """The settings line for `backend`: SQLite in the data folder, or a fresh PostgreSQL
    database (dropped afterwards)."""
    if backend == "sqlite":
        yield ""
        return
    from pg import fresh_database

    async with fresh_database() as url:
        yield f"database_url: {url}\n"


@asynccontextmanager
async def world(tmp_path: Path, llm: ScriptedLLM, backend: str = "sqlite") -> AsyncIterator[World]:
    async with _database(backend) as database, _world(tmp_path, llm, database) as w:
        yield w


@asynccontextmanager
async def _world(tmp_path: Path, llm: ScriptedLLM, database: str) -> AsyncIterator[World]:
    llm.route(route)
    NOTES.clear()
    yaml_text = f"auth:\n  enabled: true\nserver:\n  heartbeat_seconds: 0.2\n{database}"
    config = workflow_config(tmp_path, {"flow": FLOW}, lead_tools=["write_note", "create_artifact"],
                             yaml_text=yaml_text)
    write_agent(config / "agents", "worker", tools=[], prompt="You are worker.")
    client = await Client.open(load_settings(config, tmp_path / "data"), extra_tools=[write_note])
    try:
        alice_id, alice = await client.admin.create_token("alice")
        _, bob = await client.admin.create_token("bob")
        async with serving(create_app(client=client)) as url:
            w = World(url, client, {"Authorization": f"Bearer {alice}"}, {"Authorization": f"Bearer {bob}"},
                      alice_id, llm=llm)
            async with httpx.AsyncClient(base_url=url, timeout=60) as http:
                await _populate(http, w, tmp_path)
            yield w
    finally:
        await client.aclose()


# --- what Alice sees --------------------------------------------------------------------------

VOLATILE = ("_at", "expires", "next_run_date", "ttl", "stream_url", "elapsed", "score")


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in sorted(value.items())
                if not any(k.endswith(s) or k == s for s in VOLATILE)}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


async def snapshot(w: World) -> dict[str, Any]:
    """Everything Alice can read (threads, runs, states, messages, artifacts, memories, store
    items, knowledge, crons, workflow runs), the tool's effects and the model calls made."""
    a, ids = w.alice, w.ids
    out: dict[str, Any] = {}
    async with httpx.AsyncClient(base_url=w.url, timeout=60, headers=a) as http:
        async def get(path: str, **params: Any) -> Any:
            answer = await http.get(path, params=params)
            return answer.status_code, _stable(answer.json()) if answer.content else None

        async def post(path: str, body: Any) -> Any:
            answer = await http.post(path, json=body)
            return answer.status_code, _stable(answer.json()) if answer.content else None

        out["threads"] = await post("/threads/search", {"limit": 100})
        for key in ("thread_id", "paused_thread_id", "conversation_id"):
            t = ids[key]
            out[f"{key}.runs"] = await get(f"/threads/{t}/runs", limit=100)
            out[f"{key}.state"] = await get(f"/threads/{t}/state")
            out[f"{key}.tree"] = await get(f"/api/v1/conversations/{t}")
        out["conversations"] = await get("/api/v1/conversations", limit=100)
        c = ids["conversation_id"]
        out["artifacts"] = await get(f"/api/v1/conversations/{c}/artifacts")
        out["versions"] = await get(f"/api/v1/conversations/{c}/artifacts/report/versions")
        out["memories"] = await get("/api/v1/memories", limit=100)
        out["store"] = await post("/store/items/search", {"namespace_prefix": [], "limit": 100})
        out["namespaces"] = await post("/store/namespaces", {})
        out["crons"] = await post("/runs/crons/search", {})
        out["assistants"] = await post("/assistants/search", {"limit": 100})
        out["workflow_runs"] = await get("/api/v1/workflows/flow/runs")
    out["knowledge"] = _stable([d.to_dict() for d in await w.client.knowledge.list(user_id=w.alice_id)])
    out["notes"] = list(NOTES)
    out["model_calls"] = len(w.llm.requests) if w.llm else 0
    json.dumps(out, default=str)  # plain data, comparable
    return out


# --- Alice's holdings as path values and request bodies -----------------------------------

# Path parameters that name a resource a user owns (Alice's values: `holdings`).
OWNED = {"thread_id", "conversation_id", "run_id", "message_id", "memory_id", "cron_id",
         "checkpoint_id", "artifact_id"}


def holdings(ids: dict[str, str]) -> list[dict[str, str]]:
    """Alice's resources as coherent sets of path values (a run with its own thread, ...)."""
    return [
        {"thread_id": ids["thread_id"], "conversation_id": ids["thread_id"], "run_id": ids["run_id"],
         "checkpoint_id": ids["checkpoint_id"]},
        {"thread_id": ids["paused_thread_id"], "conversation_id": ids["paused_thread_id"],
         "run_id": ids["paused_run_id"], "message_id": ids["paused_message_id"]},
        {"thread_id": ids["conversation_id"], "conversation_id": ids["conversation_id"],
         "artifact_id": ids["artifact_id"], "message_id": ids["message_id"]},
        {"message_id": ids["workflow_message_id"]},
        *({"memory_id": ids[k]} for k in ("memory_global", "memory_project", "memory_conversation")),
        {"cron_id": ids["cron_id"]},
    ]


def targets(path: str, ids: dict[str, str]) -> list[dict[str, str]]:
    """Alice's values for the path's parameters: each holding that has them all."""
    names = re.findall(r"{(\w+)}", path)
    owned = [n for n in names if n in OWNED]
    shared = {n: ids[n] for n in names if n not in OWNED}
    if path.startswith("/assistants/{assistant_id}"):  # a built-in one (shared), then her own
        return [shared, {"assistant_id": ids["saved_assistant_id"]}]
    if not owned:
        return [shared]
    found = [{**shared, **{n: h[n] for n in owned}} for h in holdings(ids) if all(n in h for n in owned)]
    assert found, f"no resource of Alice's for {path}: add one to surface_world.py"
    return found


def valid_bodies(method: str, path: str, ids: dict[str, str], target: dict[str, str]) -> list[Any]:
    """Well-formed bodies that name Alice's things: Bob's refusal is then the ownership
    check's, and a fuzzed field in one of them is the only thing wrong with it."""
    assistant = ids["assistant_id"]
    paused = target.get("thread_id") == ids["paused_thread_id"]
    run = {"assistant_id": assistant, **({"command": approve()} if paused else {"input": human("hello")})}
    a2a_send = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": {
        "role": "user", "parts": [{"kind": "text", "text": "hi"}], "messageId": "b1",
        "contextId": ids["thread_id"]}}}
    table: dict[tuple[str, str], list[Any]] = {
        ("POST", "/threads"): [{"thread_id": ids["thread_id"]}],
        ("PATCH", "/threads/{thread_id}"): [{"metadata": {"m": "bob"}}],
        ("POST", "/threads/{thread_id}/copy"): [{}],
        ("POST", "/threads/{thread_id}/state"): [{"values": {"messages": []}}],
        ("POST", "/threads/{thread_id}/state/checkpoint"): [{"checkpoint": {"checkpoint_id": ids["checkpoint_id"]}}],
        ("POST", "/threads/{thread_id}/history"): [{}],
        ("POST", "/threads/search"): [{"ids": [ids["thread_id"], ids["paused_thread_id"]]}, {}],
        ("POST", "/threads/count"): [{"metadata": {"m": MARK}}],
        ("POST", "/threads/{thread_id}/runs/crons"): [{"assistant_id": assistant, "schedule": "0 0 1 1 *"}],
        ("POST", "/runs/crons"): [{"assistant_id": assistant, "schedule": "0 0 1 1 *"}],
        ("PATCH", "/runs/crons/{cron_id}"): [{"enabled": False}],
        ("POST", "/runs/crons/search"): [{}, {"thread_id": ids["thread_id"]}],
        ("POST", "/runs/crons/count"): [{"thread_id": ids["thread_id"]}],
        ("PUT", "/store/items"): [{"namespace": ["notes"], "key": "k1", "value": {"text": "bob"}}],
        ("DELETE", "/store/items"): [{"namespace": ["notes"], "key": "k1"}],
        ("POST", "/store/items/search"): [{"namespace_prefix": p} for p in (
            ["notes"], [], [ids["alice_id"]], ["john"], ["john.smith@example.com"],
            ["john", "smith@example", "com"], [ids["alice_id"], "john.smith@example.com"])],
        ("POST", "/store/namespaces"): [{}, {"prefix": ["notes"]}, {"prefix": ["john"]},
                                        {"prefix": ["john.smith@example.com"]}],
        ("POST", "/assistants"): [{"graph_id": "agent", "assistant_id": ids["saved_assistant_id"]},
                                  {"graph_id": "agent", "assistant_id": ids["saved_assistant_id"],
                                   "if_exists": "do_nothing"}],
        ("POST", "/assistants/{assistant_id}/latest"): [{"version": 1}],
        ("PATCH", "/assistants/{assistant_id}"): [{"name": "bob's", "metadata": {"m": "bob"}}],
        ("POST", "/assistants/search"): [{}],
        ("POST", "/assistants/count"): [{}],
        ("POST", "/api/v1/chat"): [{"content": "hi", "conversation_id": ids["conversation_id"]},
                                   {"content": "hi", "parent_message_id": ids["message_id"]}],
        ("POST", "/api/v1/chat/{message_id}/resume"): [{"decisions": "approve"}],
        ("POST", "/api/v1/memories"): [{"text": "bob", "scope": "conversation",
                                        "conversation_id": ids["conversation_id"]}],
        ("POST", "/api/v1/memories:batch"): [{"texts": ["bob"], "scope": "conversation",
                                              "conversation_id": ids["conversation_id"]}],
        ("POST", "/api/v1/workflows/{name}/runs"): [{"input": {"topic": "x"},
                                                     "conversation_id": ids["conversation_id"]}],
        ("POST", "/api/v1/render"): [{"text": "hi"}],
        ("POST", "/a2a/{assistant_id}"): [
            a2a_send,
            *({"jsonrpc": "2.0", "id": 2, "method": m, "params": {"id": task}}
              for m in ("tasks/get", "tasks/cancel")
              for task in (ids["message_id"], ids["paused_run_id"], ids["run_id"])),
        ],
    }
    for suffix in ("/runs", "/runs/stream", "/runs/wait"):
        table[("POST", "/threads/{thread_id}" + suffix)] = [run]
        table[("POST", suffix)] = [{"assistant_id": assistant, "input": human("hello")}]
    if (method, path) in table:
        return table[(method, path)]
    return [None] if method in ("GET", "DELETE") or "/cancel" in path or "/retry" in path else [{}]


