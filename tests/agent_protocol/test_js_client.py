"""The JS client: tests/js/use-stream-check.mjs drives the server with `@langchain/langgraph-sdk`
(npm) the way React's `useStream` does — stream a run, get the human-in-the-loop interrupt,
resume it with `command: {resume: {decisions: [...]}}` — then agent-chat-ui's Regenerate,
Edit, Reject and branch switch, and prints what it saw.

`npm ci` runs once per lock file (node_modules/.package-lock.json newer than package-lock.json
means installed). No node or npm: skipped locally, a failure under `CI=1`."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import shutil
from pathlib import Path

import pytest

from .conftest import Server
from .toy import NOTES

JS = Path(__file__).resolve().parent.parent / "js"


def _require(tool: str) -> str:
    found = shutil.which(tool)
    if found is None:
        reason = f"{tool} not installed (the JS client test needs Node.js 18+ and npm)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}; CI must not skip it")
        pytest.skip(reason)
    return found


async def _run(*command: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *command, cwd=JS, env={**os.environ, **(env or {})},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 300)
    return process.returncode or 0, out.decode(), err.decode()


async def _npm_ci() -> None:
    """`npm ci` once, whichever test worker comes first: the others wait on a file lock (two
    `npm ci` into one `node_modules` at once leave it half-installed)."""
    npm = _require("npm")
    installed = JS / "node_modules" / ".package-lock.json"
    lock = JS / "package-lock.json"
    with open(JS / ".npm-ci.lock", "w") as guard:
        await asyncio.to_thread(fcntl.flock, guard.fileno(), fcntl.LOCK_EX)
        try:
            if installed.exists() and installed.stat().st_mtime >= lock.stat().st_mtime:
                return
            code, out, err = await _run(npm, "ci", "--no-audit", "--no-fund", "--prefer-offline")
            assert code == 0, f"npm ci failed:\n{out}\n{err}"
        finally:
            fcntl.flock(guard.fileno(), fcntl.LOCK_UN)


async def test_use_stream_flow_with_the_js_sdk(server: Server) -> None:
    node = _require("node")
    await _npm_ci()
    code, out, err = await _run(
        node, "use-stream-check.mjs", server.url, "write a note: buy milk",
        env={"ASSISTANT_ID": server.assistant_id},
    )
    assert code == 0, f"the JS client failed:\n{err}\n{out}"
    seen = json.loads(out.strip().splitlines()[-1])
    first, resumed = seen["first"], seen["resumed"]

    assert first["metadataFirst"] and {"values", "updates"} <= set(first["events"])
    [interrupt] = first["interrupts"]
    assert interrupt["id"]
    assert [a["name"] for a in interrupt["value"]["action_requests"]] == ["write_note"]
    assert interrupt["value"]["review_configs"][0]["action_name"] == "write_note"
    assert first["historyLength"] >= 1

    assert resumed is not None and resumed["metadataFirst"] and not resumed["interrupts"]
    assert "messages" in resumed["events"]
    final = resumed["messages"]
    assert [m["type"] for m in final if m["type"] == "tool"] == ["tool"]
    answer = [m for m in final if m["type"] == "ai"][-1]
    assert answer["content"] and answer["content"] in resumed["streamedTexts"].values()
    assert seen["threadStatus"] == "idle"
    if server.local:
        assert NOTES[0] == "buy milk"

    # agent-chat-ui's Regenerate, Edit, Reject and branch switch
    flows = seen["flows"]
    regenerated = flows["regenerated"]
    assert [m["type"] for m in regenerated][0] == "human" and regenerated[-1]["type"] == "ai"
    assert regenerated[-1]["id"] != answer["id"] and regenerated[-1]["content"]
    assert flows["edited"]["interrupts"] == 1  # the edited question asks for the tool again
    rejected = flows["rejected"]
    assert [m["content"] for m in rejected if m["type"] == "human"] == ["write a note: edited milk"]
    assert "not now" in [m for m in rejected if m["type"] == "tool"][-1]["content"]
    assert flows["forks"] >= 1  # the history's parent_checkpoint tree branches
    assert flows["switchedTo"][0] == "human" and flows["switchedTo"][-1] == "ai"
    if server.local:
        assert "edited milk" not in NOTES  # rejected: the tool did not run
