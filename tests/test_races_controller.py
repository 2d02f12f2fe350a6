"""Races the run engine must order (issue 12: D1-D5 controller side, D8, gc).

Each test reproduces a defect deterministically; each failed before the controller used the
store's compare-and-set writes (`AppStore.change_status`, token-checked `append_events`), the
owner-checked checkpoint writes and the tool registry's record of abandoned calls
(`ToolRegistry.background.take_abandoned`).

"Two processes" are two clients on one data folder. A race is made certain by running the
other side at the exact moment it must land: inside the first store write of a cancel (after
the cancel read the message, before it wrote anything).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from cli_fork import fork_python_async
from conftest import make_config
from langgraph.checkpoint.base import empty_checkpoint
from pg import fresh_database
from resume_helpers import RESUMER
from scripted_llm import Call, Text, ToolCalls
from waiting import wait_until

from artifactflow import Client, Resume, ResumeConflictError, load_settings, tool

DEPLOYS: list[str] = []
EFFECTS: list[str] = []
STARTED = threading.Event()
RELEASE = threading.Event()
HOLD: dict[str, asyncio.Event | None] = {"step": None}
STEP_STARTED: list[bool] = []


@tool(permission="confirm")
async def deploy(target: str) -> str:
    """Deploy (needs approval).

    Args:
        target: Where.
    """
    DEPLOYS.append(target)
    return f"deployed {target}"


@tool
def blocking(text: str) -> str:
    """A sync tool that runs until the test releases it.

    Args:
        text: Written when released.
    """
    STARTED.set()
    RELEASE.wait(10)
    EFFECTS.append(text)
    return "written"


@tool
async def step(n: int) -> str:
    """A step; the first call waits for the test (a process that is suspended).

    Args:
        n: Step number.
    """
    hold, HOLD["step"] = HOLD["step"], None
    if hold is not None:
        STEP_STARTED.append(True)
        await hold.wait()
    return f"step {n}"


TOOLS = [deploy, blocking, step]


@pytest.fixture(autouse=True)
def reset() -> None:
    DEPLOYS.clear()
    EFFECTS.clear()
    STARTED.clear()
    RELEASE.clear()
    STEP_STARTED.clear()
    HOLD["step"] = None


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return make_config(tmp_path, lead_tools=["deploy", "blocking", "step"])


async def paused_message(client: Client, llm: Any) -> str:
    llm.script(ToolCalls([Call("deploy", {"target": "prod"}, id="c1")]))
    result = await client.run("deploy")
    assert result.status == "waiting"
    return result.message_id


def before_first_write(
    client: Client, monkeypatch: pytest.MonkeyPatch, other: Callable[[], Awaitable[Any]]
) -> list[Any]:
    """Run `other` once, just before `client`'s first store write; return its outcome."""
    outcome: list[Any] = []
    store = client.admin.store
    for name in ("update_message", "change_status", "append_event", "append_events"):
        original = getattr(store, name)

        async def wrapped(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            if not outcome:
                try:
                    outcome.append(await other())
                except ResumeConflictError as exc:
                    outcome.append(exc)
            return await _original(*args, **kwargs)

        monkeypatch.setattr(store, name, wrapped)
    return outcome


def assert_contiguous(events: list[Any]) -> None:
    ids = [e.event_id for e in events]
    assert ids == list(range(1, len(ids) + 1)), ids


async def test_d1_cancel_racing_a_resume_from_another_process(
    make_client: Any, config: Path, llm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = await make_client(config_dir=config, extra_tools=TOOLS)
    b = await make_client(config_dir=config, extra_tools=TOOLS)
    mid = await paused_message(a, llm)
    llm.script(Text("deployed"))
    resumed = before_first_write(b, monkeypatch, lambda: a.runs.start(Resume(mid, "approve")))
    cancelled = await b.runs.cancel(mid)
    await a.admin.wait(mid)
    final = await a.admin.store.get_message(mid)
    events = await a.runs.events(mid)
    assert_contiguous(events)
    requests = [e for e in events if e.type == "permission_request"]
    assert len(requests) == 1, "the message restarted from an empty state and asked again"
    if cancelled:
        assert final["status"] == "cancelled", final["status"]
        assert events[-1].type == "cancelled"
    else:
        assert resumed and not isinstance(resumed[0], Exception)
        assert final["status"] == "completed" and DEPLOYS == ["prod"]


async def test_d2_cancel_right_after_resume_ends_cancelled_and_frees_the_slot(
    make_client: Any, config: Path, llm: Any
) -> None:
    client = await make_client(config_dir=config, extra_tools=TOOLS)
    mid = await paused_message(client, llm)
    run = await client.runs.start(Resume(mid, "approve"))
    assert await run.cancel() is True  # before the run's task ever ran
    await client.admin.wait(mid)
    assert (await client.admin.store.get_message(mid))["status"] == "cancelled"
    assert client.admin.active_run_count() == 0
    events = await client.runs.events(mid)
    assert events[-1].type == "cancelled" and DEPLOYS == []
    assert_contiguous(events)


async def test_d2_cancel_right_after_start_ends_cancelled(
    make_client: Any, config: Path, llm: Any
) -> None:
    client = await make_client(config_dir=config, extra_tools=TOOLS)
    run = await client.runs.start("hello")
    assert await run.cancel() is True
    await client.admin.wait(run.message_id)
    assert (await client.admin.store.get_message(run.message_id))["status"] == "cancelled"
    assert client.admin.active_run_count() == 0


async def test_d3_two_cancels_one_winner(
    make_client: Any, config: Path, llm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = await make_client(config_dir=config, extra_tools=TOOLS)
    b = await make_client(config_dir=config, extra_tools=TOOLS)
    mid = await paused_message(a, llm)
    first = before_first_write(b, monkeypatch, lambda: a.runs.cancel(mid))
    second = await b.runs.cancel(mid)
    assert sorted([bool(first[0]), second]) == [False, True]
    events = await a.runs.events(mid)
    assert [e.type for e in events].count("cancelled") == 1
    assert_contiguous(events)


CRASH_PLUGIN = '''
import os, time
from pathlib import Path
from artifactflow import tool

@tool(permission="confirm")
def deploy_slowly(target: str) -> str:
    """Deploy (needs approval); hangs while the block file exists."""
    journal = Path(os.environ["AF_JOURNAL"])
    with journal.open("a", encoding="utf-8") as f:
        f.write(target + "\\n")
    while Path(str(journal) + ".block").exists():
        time.sleep(0.01)
    return f"deployed {target}"
'''


async def test_d4_no_denial_is_recorded_for_a_call_that_ran(
    make_client: Any, llm: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = tmp_path / "journal.txt"
    monkeypatch.setenv("AF_JOURNAL", str(journal))
    config = make_config(
        tmp_path, lead_tools=["deploy_slowly"], yaml_text="plugins: [d4_tools]\n",
        plugin_files={"d4_tools.py": CRASH_PLUGIN},
    )
    first = await make_client(config_dir=config)
    llm.script(ToolCalls([Call("deploy_slowly", {"target": "prod"}, id="c1")]))
    paused = await first.run("deploy")
    data = first.settings.data_dir
    await first.aclose()
    (tmp_path / "journal.txt.block").touch()
    proc = await fork_python_async(  # a process of its own, forked (tests/cli_fork.py)
        RESUMER, [str(config), str(data), paused.message_id], dict(os.environ)
    )
    try:
        await wait_until(lambda: journal.exists() and journal.read_text() == "prod\n")
    finally:
        proc.kill()  # mid-tool, after the effect
        await proc.wait()
    (tmp_path / "journal.txt.block").unlink()
    second = await make_client(config_dir=config, data_dir=data)
    await second.admin.store.update_message(paused.message_id, lease_expires_at=0.0)  # lease ran out
    llm.script(Text("ok"))
    done = await second.run(Resume(paused.message_id, "approve"))
    assert done.status == "completed"  # the claim kept the answer: it is not asked again
    log = [e.type for e in await second.runs.events(paused.message_id)]
    assert log.count("permission_request") == 1 and log.count("tool_start") == 1
    last = [e for e in done.events if e.type == "tool_complete"][-1]
    assert last.data.outcome == "interrupted"
    assert "denied" not in (last.data.result.error or "")
    assert journal.read_text() == "prod\n"


async def test_d5_cancel_records_the_sync_tool_it_abandoned(
    make_client: Any, config: Path, llm: Any
) -> None:
    client = await make_client(config_dir=config, extra_tools=TOOLS)
    llm.script(ToolCalls([Call("blocking", {"text": "late"}, id="c1")]))
    run = await client.runs.start("block")
    await wait_until(STARTED.is_set)
    assert await run.cancel() is True
    events = await client.runs.events(run.message_id)
    assert [e.type for e in events][-2:] == ["tool_complete", "cancelled"]
    record = events[-2].data
    assert record.outcome == "abandoned" and record.may_still_take_effect is True
    RELEASE.set()
    await wait_until(lambda: EFFECTS == ["late"])


async def test_d8_a_stale_owner_writes_nothing_and_exits_quietly(
    make_client: Any, config: Path, llm: Any, caplog: pytest.LogCaptureFixture
) -> None:
    a = await make_client(config_dir=config, extra_tools=TOOLS)
    b = await make_client(config_dir=config, extra_tools=TOOLS)
    hold = asyncio.Event()
    HOLD["step"] = hold
    llm.script(ToolCalls([Call("step", {"n": 1}, id="c1")]))
    run = await a.runs.start("steps")
    mid = run.message_id
    await wait_until(lambda: bool(STEP_STARTED))  # A is "suspended" inside the tool
    await b.admin.store.update_message(mid, lease_expires_at=0.0)  # ... for longer than its lease
    llm.script(Text("done by B"))
    recovered = await b.run(Resume(mid, "approve"))
    assert recovered.status == "completed"
    written = [e.event_id for e in await b.runs.events(mid)]
    with caplog.at_level(logging.WARNING):
        hold.set()  # A wakes up
        await a.admin.wait(mid)
    final = await b.admin.store.get_message(mid)
    assert final["status"] == "completed" and final["response"] == "done by B"
    assert [e.event_id for e in await b.runs.events(mid)] == written  # A wrote no event
    assert not await b.admin.checkpoints.has_checkpoint(run.thread_id)  # nor a checkpoint
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_gc_removes_checkpoints_of_finished_messages(
    make_client: Any, config: Path, llm: Any, backend: str, tmp_path: Path
) -> None:
    async with contextlib.AsyncExitStack() as stack:
        if backend == "sqlite":
            client = await make_client(config_dir=config, extra_tools=TOOLS)
        else:
            url = await stack.enter_async_context(fresh_database())
            settings = load_settings(config, tmp_path / "data", database_url=url)
            client = await Client.open(settings, extra_tools=TOOLS)
            stack.push_async_callback(client.aclose)
        await _gc_removes_stale_rows(client, llm)


async def _gc_removes_stale_rows(client: Client, llm: Any) -> None:
    llm.script(Text("hi"))
    done = await client.run("hello")
    assert not await client.admin.checkpoints.has_checkpoint(done.thread_id)
    # A stale owner (or a crash between two deletes) leaves a row behind a finished message.
    saver = client.admin.checkpoints.saver
    stale: Any = {"configurable": {"thread_id": done.thread_id, "checkpoint_ns": ""}}
    await saver.aput(stale, empty_checkpoint(), {}, {})
    assert await client.admin.checkpoints.has_checkpoint(done.thread_id)
    await client.admin.gc()
    assert not await client.admin.checkpoints.has_checkpoint(done.thread_id)
