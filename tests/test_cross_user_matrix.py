"""The cross-user matrix: Bob calls every route of the app (enumerated from the app, so a new
route is in the matrix or excused below with a reason) with Alice's ids and namespaces.

A route that names one of Alice's resources in its path answers Bob 404 (or 403), exactly as a
missing one; a route that lists or searches answers with Bob's own (none of hers); no answer
holds `MARK` (every resource of Alice's carries it); and afterwards Alice sees exactly what she
saw before (snapshot: threads, runs, states, messages, artifacts, memories, store items,
knowledge, crons, workflow runs, and the paused tool never ran).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
from agent_protocol.helpers import approve, human
from route_surface import app_routes
from scripted_llm import ScriptedLLM
from surface_world import MARK, World, snapshot, world

# Path parameters that name a resource a user owns (Alice's values: `_holdings`).
OWNED = {"thread_id", "conversation_id", "run_id", "message_id", "memory_id", "cron_id",
         "checkpoint_id", "artifact_id"}
# Shared by design (no owner to check): Bob may read them; nothing of Alice's may show.
SHARED = {"assistant_id", "name"}

EXCUSED = {
    ("GET", "/mcp"): "the MCP session's event stream: names no resource (tools/call is in the matrix)",
    ("DELETE", "/mcp"): "ends an MCP session: names no resource",
    ("POST", "/assistants"): "assistants are shared by all users (no owner): not a cross-user route",
    ("PATCH", "/assistants/{assistant_id}"): "assistants are shared by all users (no owner)",
    ("DELETE", "/assistants/{assistant_id}"): "assistants are shared by all users (no owner)",
    ("POST", "/assistants/{assistant_id}/versions"): "assistants are shared by all users (no owner)",
    ("POST", "/assistants/{assistant_id}/latest"): "assistants are shared by all users (no owner)",
}
# Known and documented: thread ids are one space for all users (docs/agent-protocol.md), so
# creating a thread with an id someone holds is a 409, whoever holds it.
TAKEN = {("POST", "/threads")}


def _bodies(method: str, path: str, ids: dict[str, str], target: dict[str, str]) -> list[Any]:
    """Well-formed bodies that name Alice's things (so a refusal is the ownership check's)."""
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


STORE_GETS = ["notes", "john.smith@example.com.notes", "john", "{alice_id}.notes"]


def _queries(path: str, ids: dict[str, str]) -> dict[str, str]:
    return {
        "/api/v1/memories/search": {"q": "vault global project chat"},
        "/api/v1/conversations/{conversation_id}/artifacts/{artifact_id}/diff": {"from": "1", "to": "1"},
    }.get(path, {})


def _holdings(ids: dict[str, str]) -> list[dict[str, str]]:
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


def _targets(path: str, ids: dict[str, str]) -> list[dict[str, str]]:
    """Alice's values for the path's parameters: each holding that has them all."""
    names = re.findall(r"{(\w+)}", path)
    owned = [n for n in names if n in OWNED]
    shared = {n: ids[n] for n in names if n not in OWNED}
    if not owned:
        return [shared]
    found = [{**shared, **{n: h[n] for n in owned}} for h in _holdings(ids) if all(n in h for n in owned)]
    assert found, f"no resource of Alice's for {path}: add one to surface_world.py"
    return found


def _cases(w: World) -> list[tuple[str, str, str, Any, dict[str, str], bool]]:
    ids = {**w.ids, "alice_id": w.alice_id}
    cases = []
    for method, path in app_routes():
        if (method, path) in EXCUSED or path == "/mcp":
            continue
        for target in _targets(path, ids):
            url = path.format(**target)
            owned = any(n in OWNED for n in target)
            for body in _bodies(method, path, ids, target):
                if (method, path) == ("GET", "/store/items"):  # Alice's namespaces, dotted too
                    cases.extend((method, path, url, body, {"namespace": n.format(**ids), "key": "k1"}, True)
                                 for n in STORE_GETS)
                    continue
                cases.append((method, path, url, body, _queries(path, ids), owned))
    # reads first, so Bob's own writes (a store item under his "notes") cannot mask a 404
    return sorted(cases, key=lambda c: c[0] != "GET")


def _refused(method: str, path: str, answer: httpx.Response, owned: bool) -> str | None:
    """Why this answer to Bob is wrong, or None."""
    if MARK in answer.text:
        return "leak: the answer holds Alice's data"
    if answer.status_code >= 500:
        return "5xx"
    if (method, path) in TAKEN:
        return None if answer.status_code == 409 else "expected 409"
    if owned and answer.status_code not in (403, 404):
        return f"expected 404/403, got {answer.status_code}"
    if path.startswith("/a2a/"):
        rpc = answer.json()
        if rpc.get("method") != "message/send" and "error" not in rpc:
            return "A2A answered a task of Alice's"
    if path == "/threads/count" and answer.json() != 0:
        return "counted Alice's threads"
    if path == "/runs/crons/count" and answer.json() != 0:
        return "counted Alice's crons"
    return None


async def _mcp_on_alices_thread(w: World) -> tuple[bool, str]:
    """Bob's MCP tools/call continuing Alice's thread: an error, none of her data."""
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with httpx.AsyncClient(headers=w.bob, timeout=60) as http, \
            streamable_http_client(w.url + "/mcp", http_client=http) as (read, write, *_):
        async with ClientSession(read, write) as session:
            await session.initialize()
            tool = (await session.list_tools()).tools[0].name
            result = await session.call_tool(tool, {"messages": "hello", "thread_id": w.ids["thread_id"]})
    text = json.dumps(result.model_dump(mode="json"))
    return bool(result.is_error), text


async def test_bob_gets_nothing_of_alices_on_any_route(tmp_path: Path, llm_env: ScriptedLLM) -> None:
    async with world(tmp_path, llm_env) as w:
        before = await snapshot(w)
        before.pop("model_calls")  # Bob's own runs call the model; Alice's outputs are compared
        cases = _cases(w)
        routes = {(m, p) for m, p, *_ in cases}
        assert routes | set(EXCUSED) | {("POST", "/mcp")} == set(app_routes())
        wrong = []
        async with httpx.AsyncClient(base_url=w.url, timeout=60, headers=w.bob) as http:
            for method, path, url, body, query, owned in cases:
                content = None if body is None else json.dumps(body).encode()
                answer = await http.request(method, url, params=query, content=content,
                                            headers={"Content-Type": "application/json"})
                why = _refused(method, path, answer, owned)
                # no webhook was set on her runs, and streams would follow: not checked for her
                probe = query.get("namespace", "notes") != "notes"  # a namespace no one wrote
                if not why and owned and method == "GET" and not probe and not path.endswith(("stream", "webhook")):
                    mine = await http.get(url, params=query, headers=w.alice)  # real ids: hers work
                    why = None if mine.status_code == 200 else f"Alice herself got {mine.status_code}"
                if why:
                    wrong.append((why, method, url, str(body)[:100], answer.status_code, answer.text[:200]))
        is_error, text = await _mcp_on_alices_thread(w)
        if not is_error or MARK in text:
            wrong.append(("mcp tools/call on Alice's thread", text[:300]))
        after = await snapshot(w)
        after.pop("model_calls")
        print(f"\ncross-user matrix: {len(routes) + 1} routes, {len(cases) + 1} requests by Bob, "
              f"{sum(1 for x in wrong if x[0].startswith('leak'))} leaks, {len(wrong)} wrong answers")
        assert wrong == [], "\n".join(map(str, wrong))
        assert after == before
