"""Tools that cannot be stopped are recorded honestly (D5).

Python cannot stop a thread: a sync tool that outlives its timeout, or the cancel of its run,
keeps running and its effect may still happen. Such a call is recorded with outcome
`timed_out`/`abandoned` and `may_still_take_effect`; the model is told its effect is unknown.
By default a call runs at most once: an identical call in the same message is not run again
while the first one's effect is unknown, and gets the late result once it is known.
`@tool(idempotent=True)` lifts that: the call may be repeated.

The tools here block on `threading.Event`s the test releases, so nothing depends on timing
except the configured timeouts themselves.
"""

from __future__ import annotations

import asyncio
import os
import threading

import pytest
from cli_fork import fork_python_async
from conftest import make_config
from resume_helpers import RESUMER
from scripted_llm import Call, Text, ToolCalls
from waiting import wait_until

from artifactflow import Resume, ToolContext, tool
from artifactflow.tools.registry import ToolRegistry, run_tool_call

EFFECTS: list[str] = []
STARTED = threading.Event()
RELEASE = threading.Event()


def _slow_effect(text: str) -> str:
    STARTED.set()
    RELEASE.wait(10)
    EFFECTS.append(text)
    return f"wrote {text}"


@tool
def write_once(text: str) -> str:
    """Write something (sync, slow, not safe to repeat).

    Args:
        text: What to write.
    """
    return _slow_effect(text)


@tool(idempotent=True)
def write_same(text: str) -> str:
    """Write something (sync, slow, safe to repeat).

    Args:
        text: What to write.
    """
    return _slow_effect(text)


@tool
async def async_slow(text: str) -> str:
    """An async tool that never finishes in time.

    Args:
        text: Ignored.
    """
    await asyncio.sleep(10)
    return text


@pytest.fixture(autouse=True)
def fresh_events() -> None:
    EFFECTS.clear()
    STARTED.clear()
    RELEASE.clear()


def context(message_id: str = "m1", call_id: str = "c1") -> ToolContext:
    return ToolContext(conversation_id="conv", message_id=message_id, agent="lead", tool_call_id=call_id)


async def test_sync_tool_outliving_its_timeout_is_unknown_and_not_repeated():
    registry = ToolRegistry([write_once])
    result, _ = await run_tool_call(registry, "write_once", {"text": "a"}, context(), default_timeout=0.2)
    assert (result.success, result.outcome, result.may_still_take_effect) == (False, "timed_out", True)
    text = result.model_text()
    assert text.startswith("UNKNOWN:") and "unknown" in text and "still running" in text
    assert "failed" not in text and "ERROR" not in text
    # Asked again while the first is still running: not run a second time.
    again, _ = await run_tool_call(
        registry, "write_once", '{"text": "a"}', context(call_id="c2"), default_timeout=0.2
    )
    assert again.may_still_take_effect and "not run again" in again.model_text()
    RELEASE.set()
    await wait_until(lambda: EFFECTS == ["a"])
    # Once the first call's result is known, a repeat gets that result instead of running.
    later, _ = await run_tool_call(
        registry, "write_once", {"text": "a"}, context(call_id="c3"), default_timeout=5
    )
    assert later.success and later.outcome == "not_repeated" and not later.may_still_take_effect
    assert "wrote a" in later.model_text()
    # Other arguments, or another message, are other calls.
    other, _ = await run_tool_call(registry, "write_once", {"text": "b"}, context(), default_timeout=5)
    elsewhere, _ = await run_tool_call(
        registry, "write_once", {"text": "a"}, context("m2"), default_timeout=5
    )
    assert other.success and elsewhere.success and EFFECTS == ["a", "b", "a"]


async def test_idempotent_tool_may_be_repeated_after_a_timeout():
    registry = ToolRegistry([write_same])
    result, _ = await run_tool_call(registry, "write_same", {"text": "x"}, context(), default_timeout=0.2)
    assert result.outcome == "timed_out" and result.may_still_take_effect
    assert "safe to call it again" in result.model_text()
    RELEASE.set()
    again, _ = await run_tool_call(registry, "write_same", {"text": "x"}, context(call_id="c2"), default_timeout=5)
    assert again.success and again.outcome == "completed"
    await wait_until(lambda: len(EFFECTS) == 2)


async def test_cancel_while_a_sync_tool_runs_is_recorded_as_abandoned():
    registry = ToolRegistry([write_once])
    task = asyncio.create_task(
        run_tool_call(registry, "write_once", {"text": "z"}, context(call_id="c9"), default_timeout=5)
    )
    await wait_until(STARTED.is_set)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    [record] = registry.background.take_abandoned("m1")
    assert record["tool_call_id"] == "c9" and record["tool"] == "write_once"
    assert record["outcome"] == "abandoned" and record["may_still_take_effect"] is True
    assert "unknown" in record["result"]["error"]
    assert registry.background.take_abandoned("m1") == []
    RELEASE.set()
    await wait_until(lambda: EFFECTS == ["z"])


async def test_async_tool_timeout_is_stopped_not_unknown():
    registry = ToolRegistry([async_slow])
    result, _ = await run_tool_call(registry, "async_slow", {"text": "q"}, context(), default_timeout=0.1)
    assert result.outcome == "timed_out" and not result.may_still_take_effect
    assert result.model_text() == "ERROR: tool 'async_slow' timed out after 0.1 s"


async def test_run_records_the_timed_out_call_and_tells_the_model(make_client, llm, tmp_path):
    config = make_config(tmp_path, lead_tools=["write_once"], yaml_text="tools:\n  timeout: 0.2\n")
    client = await make_client(config_dir=config, extra_tools=[write_once])
    llm.script(ToolCalls([Call("write_once", {"text": "run"}, id="c1")]), Text("noted"))
    result = await client.run("write it")
    assert result.status == "completed"
    done = next(e for e in result.events if e.type == "tool_complete")
    assert done.data.outcome == "timed_out" and done.data.may_still_take_effect is True
    assert done.data.result.metadata["outcome"] == "timed_out"
    seen = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"][0]["content"]
    assert seen.startswith("UNKNOWN:") and "unknown" in seen
    RELEASE.set()
    await wait_until(lambda: EFFECTS == ["run"])


def test_idempotent_flag_on_the_tool():
    assert write_same.idempotent is True and write_once.idempotent is False


CRASH_PLUGIN = '''
import os, time
from pathlib import Path
from artifactflow import tool

@tool(permission="confirm", idempotent={idempotent})
def deploy(target: str) -> str:
    """Deploy (needs approval); hangs while the block file exists."""
    journal = Path(os.environ["AF_JOURNAL"])
    with journal.open("a", encoding="utf-8") as f:
        f.write(target + "\\n")
    while Path(str(journal) + ".block").exists():
        time.sleep(0.01)
    return f"deployed {{target}}"
'''


@pytest.mark.parametrize("idempotent", [True, False])
async def test_crash_mid_tool_reruns_only_idempotent_tools(
    make_client, llm, tmp_path, monkeypatch: pytest.MonkeyPatch, idempotent: bool
):
    journal = tmp_path / "journal.txt"
    monkeypatch.setenv("AF_JOURNAL", str(journal))
    module = f"crash_tools_{str(idempotent).lower()}"  # plugins are cached by module name
    config = make_config(
        tmp_path, lead_tools=["deploy"], yaml_text=f"plugins: [{module}]\n",
        plugin_files={f"{module}.py": CRASH_PLUGIN.format(idempotent=idempotent)},
    )
    first = await make_client(config_dir=config)
    llm.script(ToolCalls([Call("deploy", {"target": "prod"}, id="c1")]))
    paused = await first.run("deploy")
    assert paused.status == "waiting"
    data = first.settings.data_dir
    await first.aclose()
    (tmp_path / "journal.txt.block").touch()
    proc = await fork_python_async(  # a process of its own, forked (tests/cli_fork.py)
        RESUMER, [str(config), str(data), paused.message_id], dict(os.environ)
    )
    try:
        await wait_until(lambda: journal.exists() and journal.read_text() == "prod\n")
    finally:
        proc.kill()  # mid-tool: the effect happened, the call never finished
        await proc.wait()
    (tmp_path / "journal.txt.block").unlink()
    second = await make_client(config_dir=config, data_dir=data)
    await second.admin.store.update_message(paused.message_id, lease_expires_at=0.0)  # lease ran out
    llm.script(Text("done"))
    result = await second.run(Resume(paused.message_id, "approve"))
    if result.status == "waiting":  # the approval was re-asked (the crash lost the answer)
        result = await second.run(Resume(paused.message_id, "approve"))
    assert result.status == "completed", result.error
    seen = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"][0]["content"]
    if idempotent:
        assert journal.read_text() == "prod\nprod\n" and seen == "deployed prod"
    else:
        assert journal.read_text() == "prod\n" and "interrupted" in seen
