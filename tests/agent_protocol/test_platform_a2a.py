"""A2A (issue 35): the agent card, `message/send` answered by the agent, a CONFIRM tool as
`input-required` answered by a follow-up message that resumes the run exactly once,
`message/stream`, `tasks/get`, `tasks/cancel`, and JSON-RPC errors; on SQLite and PostgreSQL.
Raw JSON-RPC over HTTP, as `curl` sends it (no A2A client library is used)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from waiting import wait_until

from .test_platform import Platform, _platform
from .toy import ANSWER, NOTES


@pytest_asyncio.fixture(params=["sqlite", "postgres"])
async def platform(request: pytest.FixtureRequest, llm_env: Any, tmp_path: Path) -> AsyncIterator[Platform]:
    async with _platform(request.param, llm_env, tmp_path, "crons:\n  enabled: false\n") as p:
        yield p


def _send(text: str, **message: Any) -> dict[str, Any]:
    return {
        "message": {"role": "user", "parts": [{"kind": "text", "text": text}], "messageId": "m1", "kind": "message", **message}
    }


async def _rpc(http: httpx.AsyncClient, path: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    response = await http.post(path, json={"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == 7
    return body


async def test_card_send_and_get(platform: Platform) -> None:
    async with httpx.AsyncClient(base_url=platform.url, timeout=120) as http:
        card = (await http.get("/.well-known/agent-card.json", params={"assistant_id": platform.lead})).json()
        assert card["url"] == f"{platform.url}/a2a/{platform.lead}"
        assert card["capabilities"]["streaming"] is True and card["skills"][0]["id"] == platform.lead
        missing = await http.get("/.well-known/agent-card.json", params={"assistant_id": "nobody"})
        assert missing.status_code == 404

        task = (await _rpc(http, f"/a2a/{platform.lead}", "message/send", _send("hello a2a")))["result"]
        assert task["kind"] == "task" and task["status"]["state"] == "completed"
        assert task["artifacts"][0]["parts"][0]["text"] == ANSWER
        # the context is our thread: the next message continues it
        again = (await _rpc(http, f"/a2a/{platform.lead}", "message/send", _send("hello again", contextId=task["contextId"])))["result"]
        assert again["contextId"] == task["contextId"] and again["id"] != task["id"]
        state = await platform.client.threads.get_state(task["contextId"])
        assert len(state["values"]["messages"]) == 4

        got = (await _rpc(http, f"/a2a/{platform.lead}", "tasks/get", {"id": task["id"]}))["result"]
        assert got["status"]["state"] == "completed" and got["artifacts"][0]["parts"][0]["text"] == ANSWER
        # non-blocking: the task comes back at once; tasks/get follows it to its end
        quick = (await _rpc(http, f"/a2a/{platform.lead}", "message/send", {**_send("hello later"), "configuration": {"blocking": False}}))["result"]
        assert quick["status"]["state"] in ("working", "completed")

        async def finished() -> dict[str, Any] | None:
            got = (await _rpc(http, f"/a2a/{platform.lead}", "tasks/get", {"id": quick["id"]}))["result"]
            return got if got["status"]["state"] == "completed" else None

        assert (await wait_until(finished, timeout=120, what="the task"))["artifacts"][0]["parts"][0]["text"] == ANSWER

        errors = [
            (await _rpc(http, f"/a2a/{platform.lead}", "tasks/get", {"id": "nope"}))["error"]["code"],
            (await _rpc(http, f"/a2a/{platform.lead}", "message/fly", {}))["error"]["code"],
            (await _rpc(http, f"/a2a/{platform.lead}", "message/send", {"message": {"parts": []}}))["error"]["code"],
            (await _rpc(http, f"/a2a/{platform.lead}", "tasks/cancel", {"id": task["id"]}))["error"]["code"],
        ]
        assert errors == [-32001, -32601, -32602, -32002]
        bad = (await http.post(f"/a2a/{platform.lead}", content=b"{not json")).json()
        assert bad["error"]["code"] == -32700
        bad = (await http.post(f"/a2a/{platform.lead}", json={"jsonrpc": "1.0", "id": 3, "method": "tasks/get"})).json()
        assert bad["error"]["code"] == -32600 and bad["id"] == 3


async def test_input_required_then_follow_up_resumes_once(platform: Platform) -> None:
    path = f"/a2a/{platform.lead}"
    async with httpx.AsyncClient(base_url=platform.url, timeout=120) as http:
        task = (await _rpc(http, path, "message/send", _send("write a note: over a2a")))["result"]
        assert task["status"]["state"] == "input-required"
        assert "write_note" in task["status"]["message"]["parts"][0]["text"]
        assert NOTES == []
        follow = _send("approve", taskId=task["id"], contextId=task["contextId"])
        results = await asyncio.gather(
            _rpc(http, path, "message/send", follow), _rpc(http, path, "message/send", follow)
        )
        done = [r["result"] for r in results if "result" in r]
        refused = [r["error"] for r in results if "error" in r]
        assert len(done) == 1 and len(refused) == 1, results
        assert refused[0]["code"] == -32002
        assert done[0]["id"] == task["id"] and done[0]["status"]["state"] == "completed"
        assert done[0]["artifacts"][0]["parts"][0]["text"].startswith("Noted:")
        assert NOTES == ["over a2a"]  # the tool ran exactly once
        late = await _rpc(http, path, "message/send", follow)
        assert late["error"]["code"] == -32002

        # deny: the tool never runs; an unclear answer is an error that changes nothing
        task = (await _rpc(http, path, "message/send", _send("write a note: never")))["result"]
        unclear = await _rpc(http, path, "message/send", _send("maybe later", taskId=task["id"]))
        assert unclear["error"]["code"] == -32602
        denied = (await _rpc(http, path, "message/send", _send("deny", taskId=task["id"])))["result"]
        assert denied["status"]["state"] == "completed"
        assert NOTES == ["over a2a"]

        # cancel a paused task
        task = (await _rpc(http, path, "message/send", _send("write a note: cancel me")))["result"]
        cancelled = (await _rpc(http, path, "tasks/cancel", {"id": task["id"]}))["result"]
        assert cancelled["status"]["state"] == "canceled"


async def test_message_stream(platform: Platform) -> None:
    body = {"jsonrpc": "2.0", "id": "s1", "method": "message/stream", "params": _send("hello stream")}
    frames: list[dict[str, Any]] = []
    async with httpx.AsyncClient(base_url=platform.url, timeout=120) as http:
        async with http.stream("POST", f"/a2a/{platform.lead}", json=body) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    frames.append(json.loads(line[6:]))
    results = [f["result"] for f in frames]
    assert results[0]["kind"] == "task" and results[0]["status"]["state"] == "working"
    deltas = [r["artifact"]["parts"][0]["text"] for r in results if r["kind"] == "artifact-update" and r.get("append")]
    assert "".join(deltas) == ANSWER and len(deltas) > 1  # streamed in chunks
    assert results[-1] == {**results[-1], "kind": "status-update", "final": True}
    assert results[-1]["status"]["state"] == "completed"
