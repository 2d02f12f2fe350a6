"""The CLI around a run's edges: SIGTERM, a run owned by a dead process, signals after the
outcome is known, `retry`, unknown ids and missing credentials.

Signals go to real subprocesses once their output shows the state the test needs (a streamed
chunk), never after a sleep. The "signal while closing" case runs in-process, with the signal
sent from inside `Client.aclose`, so it lands exactly there.
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import (
    CLI,
    CONVERSATION_ID,
    MESSAGE_ID,
    TIMEOUT,
    append_call,
    in_pty,
    make_cli,
    spawn,
)
from scripted_llm import Error, ScriptedLLM, Text
from waiting import wait_until

from artifactflow import Client
from artifactflow.cli import interrupts

RETRIED_AS = re.compile(r"as message ([0-9a-f]{32})")
SLOW = "word " * 100  # 100 chunks, 0.2 s apart: still streaming when the test acts


@pytest.fixture
def cli(tmp_path: Path, llm_env: ScriptedLLM, capsys: pytest.CaptureFixture[str]) -> CLI:
    return make_cli(tmp_path, capsys)


def stored_events(cli: CLI, message_id: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in cli.call("events", message_id, "--json").out.splitlines()]


def tree(cli: CLI, conversation_id: str) -> dict[str, Any]:
    return json.loads(cli.call("history", conversation_id, "--json").out)


# --- SIGTERM and leases -----------------------------------------------------------------------


def test_sigterm_cancels_like_ctrl_c_keeps_the_partial_answer_and_exits_143(
    cli: CLI, llm: ScriptedLLM
) -> None:
    llm.script(Text(SLOW, chunk_size=5, chunk_delay=0.2))
    with spawn(cli, "run", "talk slowly") as (proc, reader):
        reader.until("word word")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 143, err
    message_id = MESSAGE_ID.search(reader.text).group(1)  # type: ignore[union-attr]
    (line,) = err.decode().splitlines()  # one line: what happened, and where the answer is
    assert line.startswith("✗ cancelled · partial answer saved (") and line.endswith(f"on message {message_id}")
    events = stored_events(cli, message_id)
    assert events[-1]["type"] == "cancelled"
    assert events[-1]["data"]["partial_response"].startswith("word word")
    (message,) = tree(cli, events[-1]["conversation_id"])["messages"]
    assert message["status"] == "cancelled" and message["response"].startswith("word word")


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_at_a_prompt_leaves_the_message_paused(
    cli: CLI, llm: ScriptedLLM, tmp_path: Path, signum: int, code: int
) -> None:
    llm.script(append_call(tmp_path / "out.txt"))
    with in_pty(cli, "run", "append") as (proc, reader):
        reader.until("[a]pprove")
        proc.send_signal(signum)
        reader.until("left paused; continue later with: artifactflow resume")
        assert proc.wait(timeout=TIMEOUT) == code
    message_id = MESSAGE_ID.search(reader.text).group(1)  # type: ignore[union-attr]
    assert message_id in cli.call("pending").out
    assert not (tmp_path / "out.txt").exists()


def test_a_run_owned_by_a_killed_process_names_its_lease(cli: CLI, llm: ScriptedLLM) -> None:
    llm.script(Text(SLOW, chunk_size=5, chunk_delay=0.2))
    with spawn(cli, "run", "talk slowly") as (proc, reader):
        reader.until("word word")
        proc.kill()  # no chance to clean up: the message stays `running` under its lease
        proc.wait(timeout=TIMEOUT)
    message_id = MESSAGE_ID.search(reader.text).group(1)  # type: ignore[union-attr]
    resumed = cli.call("resume", message_id, "--approve")
    assert resumed.code == 5
    assert "owned by another process; its lease expires in" in resumed.err
    assert "(run.lease_seconds); try again then" in resumed.err
    retried = cli.call("retry", message_id)
    assert retried.code == 5
    assert "cannot be retried" in retried.err and "lease expires in" in retried.err


# --- the outcome stands -----------------------------------------------------------------------


@pytest.fixture
def signal_while_closing(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Make `aclose` send the signals in the list to this process and wait until the command's
    guard has seen them; a SIGTERM nobody handles raises KeyboardInterrupt instead of killing
    the test run."""
    signals: list[int] = []
    original = Client.aclose

    async def aclose(self: Client, **kwargs: Any) -> None:
        current = getattr(interrupts, "_CURRENT", None)  # the command's guard, if any
        guard = current.get() if current is not None else None
        for number, signum in enumerate(signals, 1):
            os.kill(os.getpid(), signum)
            await wait_until(
                lambda n=number: guard is None or guard.count >= n, interval=0.005, what="the signal"
            )
        await original(self, **kwargs)

    def unhandled(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Client, "aclose", aclose)
    previous = signal.signal(signal.SIGTERM, unhandled)
    try:
        yield signals
    finally:
        signal.signal(signal.SIGTERM, previous)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_after_completion_does_not_change_the_exit_code(
    cli: CLI, llm: ScriptedLLM, signal_while_closing: list[int], signum: int
) -> None:
    llm.script(Text("All done."))
    signal_while_closing.append(signum)
    result = cli.call("run", "finish")
    assert result.code == 0, result.err
    assert "✓ done" in result.out and "cancelling" not in result.err
    message_id = MESSAGE_ID.search(result.out).group(1)  # type: ignore[union-attr]
    assert stored_events(cli, message_id)[-1]["type"] == "complete"


def test_a_signal_after_a_failure_keeps_exit_1(
    cli: CLI, llm: ScriptedLLM, signal_while_closing: list[int]
) -> None:
    llm.route(lambda request: Error(500, "upstream exploded"))
    signal_while_closing.append(signal.SIGINT)
    result = cli.call("run", "fail", "--no-input")
    assert result.code == 1, result.err


# --- retry ------------------------------------------------------------------------------------


def test_retry_runs_a_failed_message_again_as_a_sibling(cli: CLI, llm: ScriptedLLM) -> None:
    llm.script(Text("First answer."))
    first = cli.call("run", "first question")
    first_id = MESSAGE_ID.search(first.out).group(1)  # type: ignore[union-attr]
    conversation_id = CONVERSATION_ID.search(first.out).group(1)  # type: ignore[union-attr]
    llm.route(lambda request: Error(500, "upstream exploded"))
    failed = cli.call("run", "second question", "--conversation", conversation_id, "--no-input")
    assert failed.code == 1
    failed_id = MESSAGE_ID.search(failed.out).group(1)  # type: ignore[union-attr]

    llm.clear_routes()
    llm.script(Text("Second answer, at last."))
    retried = cli.fork("retry", failed_id)  # a process of its own, forked (tests/cli_fork.py)
    assert retried.code == 0, retried.out + retried.err
    assert "Second answer, at last." in retried.out and "✓ done" in retried.out
    new_id = RETRIED_AS.search(retried.out).group(1)  # type: ignore[union-attr]

    by_id = {m["id"]: m for m in tree(cli, conversation_id)["messages"]}
    assert by_id[new_id]["parent_id"] == by_id[failed_id]["parent_id"] == first_id
    assert by_id[new_id]["content"] == "second question"
    assert by_id[new_id]["status"] == "completed" and by_id[new_id]["active"]
    assert by_id[failed_id]["status"] == "failed" and not by_id[failed_id]["active"]
    history = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "user"]
    assert history == ["first question", "second question"]  # the failed try is not history

    again = cli.call("retry", new_id)
    assert again.code == 5
    assert "cannot be retried" in again.err and "it has completed" in again.err


def test_retry_of_a_paused_or_unknown_message_is_refused(
    cli: CLI, llm: ScriptedLLM, tmp_path: Path
) -> None:
    llm.script(append_call(tmp_path / "out.txt"))
    paused = cli.call("run", "append", "--no-input")
    assert paused.code == 3
    message_id = MESSAGE_ID.search(paused.out).group(1)  # type: ignore[union-attr]
    refused = cli.call("retry", message_id)
    assert refused.code == 5 and "waiting for a decision" in refused.err
    assert message_id in cli.call("pending").out  # untouched
    unknown = cli.call("retry", "nope")
    assert unknown.code == 2 and "message nope not found" in unknown.err


# --- unknown ids and credentials ---------------------------------------------------------------


def test_every_command_taking_an_id_exits_2_for_an_unknown_one(cli: CLI, llm: ScriptedLLM) -> None:
    llm.script(Text("Real."))
    real = cli.call("run", "hello")
    conversation_id = CONVERSATION_ID.search(real.out).group(1)  # type: ignore[union-attr]
    for args in [
        ("history", "nope"),
        ("events", "nope"),
        ("events", "nope", "--follow"),
        ("artifacts", "nope"),
        ("artifacts", "nope", "--json"),
        ("artifact", "nope", "report"),
        ("artifact", "nope", "report", "--diff", "1"),
        ("artifact", "nope", "report", "--export", "x.md"),
        ("artifact", conversation_id, "nope"),
        ("resume", "nope", "--approve"),
        ("retry", "nope"),
        ("run", "x", "--conversation", "nope"),
        ("run", "x", "--parent", "nope"),
        ("tools", "--schema", "nope"),
    ]:
        result = cli.call(*args)
        assert result.code == 2, (args, result.out, result.err)
        assert "nope" in result.err and "Traceback" not in result.err, args
    listed = cli.call("artifacts", "nope")
    assert "conversation nope not found" in listed.err and "No artifacts" not in listed.out
    assert llm.request_count == 1  # nothing ran for the unknown ids


def test_a_base_url_without_a_key_names_the_key_and_the_endpoint(cli: CLI, llm: ScriptedLLM) -> None:
    result = cli.sub("run", "hi", env=cli.env(OPENAI_API_KEY=None))
    assert result.code == 2
    assert f"no API key for the endpoint OPENAI_BASE_URL={llm.base_url}" in result.err
    assert "set OPENAI_API_KEY" in result.err and "no model endpoint configured" not in result.err
    assert llm.request_count == 0
