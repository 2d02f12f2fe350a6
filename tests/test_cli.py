"""The `artifactflow` command line, end to end.

Runs, pauses and resumes go through processes of their own (so a pause answered by another
process is proven to work), talking to the scripted model over HTTP: the real console script
where the process is the point (a first run's output, missing credentials, Ctrl-C, a
terminal), else `main()` forked from a server that imported the CLI once (`CLI.fork`,
tests/cli_fork.py). Commands that only read stored data run in-process through `main()` to
keep the file fast. An interactive approval runs under a real pseudo-terminal (`pty`).
"""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest
from cli_helpers import (
    CLI,
    CONVERSATION_ID,
    MESSAGE_ID,
    PLUGIN,
    TIMEOUT,
    append_call,
    in_pty,
    lines_of,
    make_cli,
    spawn,
)
from conftest import make_config
from scripted_llm import Call, Error, ScriptedLLM, Text, ToolCalls

from artifactflow.cli.main import main


@pytest.fixture
def cli(tmp_path: Path, llm_env: ScriptedLLM, capsys: pytest.CaptureFixture[str]) -> CLI:
    return make_cli(tmp_path, capsys)


# --- run ------------------------------------------------------------------------------------


def test_run_prints_streamed_answer_and_closing_line(cli: CLI, llm: ScriptedLLM) -> None:
    llm.script(Text("Hello there, general Kenobi.", chunk_size=4))
    result = cli.sub(
        "run", "Say hello", "--model", "model-from-flag"
    )  # global option after the command
    assert result.code == 0, result.err
    assert llm.requests[0]["model"] == "model-from-flag"
    assert "Hello there, general Kenobi." in result.out
    assert "● lead_agent" in result.out
    assert re.search(
        r"✓ done · .* \d+ tokens \(\d+ prompt \+ \d+ completion\) · 1 LLM call", result.out
    )
    assert "Traceback" not in result.out + result.err


def test_run_json_prints_only_event_lines(cli: CLI, llm: ScriptedLLM) -> None:
    llm.script(Text("Hi from JSON.", chunk_size=3))
    result = cli.fork("run", "Say hi", "--json")
    assert result.code == 0, result.err
    events = [json.loads(line) for line in result.out.splitlines()]
    types = [e["type"] for e in events]
    assert types[0] == "metadata" and types[-1] == "complete"
    assert "llm_chunk" in types
    assert (
        "".join(e["data"]["delta"] for e in events if e["type"] == "llm_chunk") == "Hi from JSON."
    )
    assert len({e["message_id"] for e in events}) == 1


def test_missing_credentials_exit_2_without_traceback(cli: CLI) -> None:
    result = cli.sub("run", "hi", env=cli.env(OPENAI_API_KEY=None))
    assert result.code == 2
    assert "OPENAI_API_KEY" in result.err
    assert "Traceback" not in result.out + result.err
    assert len(result.err.strip().splitlines()) <= 3


def test_provider_that_keeps_failing_exits_1_with_one_line(cli: CLI, llm: ScriptedLLM) -> None:
    llm.route(lambda request: Error(500, "upstream exploded"))
    result = cli.call("run", "hi", "--no-input")  # in-process: no subprocess timeout to race
    assert result.code == 1
    assert "Traceback" not in result.out + result.err
    reason = result.err.strip().splitlines()
    assert len(reason) == 1 and "run failed" in reason[0] and "exploded" in reason[0]


def test_max_tool_rounds_exits_4(
    tmp_path: Path, llm_env: ScriptedLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    config = make_config(
        tmp_path,
        lead_tools=["append_line"],
        max_tool_rounds=1,
        yaml_text="plugins: [file_tools]\n",
        plugin_files={"file_tools.py": PLUGIN},
    )
    cli = CLI(config, tmp_path / "data", capsys)
    target = tmp_path / "out.txt"
    llm_env.script(*(append_call(target, str(i), f"call_{i}") for i in range(3)), Text("never"))
    result = cli.call("run", "loop", "--no-input")
    assert result.code == 4, result.out + result.err
    assert "max_tool_rounds" in result.out


# --- permissions ----------------------------------------------------------------------------


def test_pause_pending_resume_and_conflict_across_processes(
    cli: CLI, llm: ScriptedLLM, tmp_path: Path
) -> None:
    target = tmp_path / "out.txt"
    llm.script(append_call(target), Text("Appended."))
    paused = cli.fork("run", "append a line", "--no-input")
    assert paused.code == 3, paused.out + paused.err
    message_id = MESSAGE_ID.search(paused.out).group(1)  # type: ignore[union-attr]
    assert f"artifactflow resume {message_id} --approve" in paused.out
    assert "call_a" in paused.out and "append_line" in paused.out
    assert not target.exists()

    listed = cli.fork("pending")
    assert listed.code == 0
    assert message_id in listed.out and "call_a" in listed.out and "append_line" in listed.out

    resumed = cli.fork("resume", message_id, "--approve")
    assert resumed.code == 0, resumed.out + resumed.err
    assert "Appended." in resumed.out and "✓ append_line" in resumed.out
    assert lines_of(target) == ["hello"]

    again = cli.fork("resume", message_id, "--approve")
    assert again.code == 5
    assert "not waiting" in again.err and "Traceback" not in again.err
    assert lines_of(target) == ["hello"]
    assert cli.call("pending", "--json").out.strip() == "[]"


def test_deny_with_reason_reaches_the_model(cli: CLI, llm: ScriptedLLM, tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    llm.script(append_call(target), Text("Understood, I did not write it."))
    paused = cli.call("run", "append", "--no-input", "--json")
    assert paused.code == 3
    events = [json.loads(line) for line in paused.out.splitlines()]  # stdout: events only
    assert events[-1]["type"] == "permission_request"
    message_id = events[-1]["message_id"]
    assert f"artifactflow resume {message_id} --approve" in paused.err
    result = cli.fork("resume", message_id, "--deny", "--reason", "not on a Friday")
    assert result.code == 0, result.out + result.err
    assert "denied" in result.out
    assert not target.exists()
    tool_messages = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert "not on a Friday" in tool_messages[-1]["content"]


def test_always_allows_the_tool_for_the_conversation(
    cli: CLI, llm: ScriptedLLM, tmp_path: Path
) -> None:
    target = tmp_path / "out.txt"
    llm.script(append_call(target, "one"), Text("First."))
    paused = cli.call("run", "append", "--no-input")
    assert paused.code == 3
    message_id = MESSAGE_ID.search(paused.out).group(1)  # type: ignore[union-attr]
    conversation_id = CONVERSATION_ID.search(paused.out).group(1)  # type: ignore[union-attr]
    assert cli.fork("resume", message_id, "--decision", "call_a=always").code == 0
    llm.script(append_call(target, "two", "call_b"), Text("Second."))
    second = cli.fork("run", "append again", "--conversation", conversation_id, "--no-input")
    assert second.code == 0, second.out + second.err
    assert "paused" not in second.out
    assert lines_of(target) == ["one", "two"]


def test_yes_approves_automatically(cli: CLI, llm: ScriptedLLM, tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    llm.script(append_call(target), Text("Done."))
    result = cli.fork("run", "append", "--yes")
    assert result.code == 0, result.out + result.err
    assert lines_of(target) == ["hello"]


def test_bad_decisions_and_unknown_ids_exit_2(cli: CLI, llm: ScriptedLLM, tmp_path: Path) -> None:
    llm.script(append_call(tmp_path / "out.txt"), Text("Done."))
    message_id = MESSAGE_ID.search(cli.call("run", "append", "--no-input").out).group(1)  # type: ignore[union-attr]
    wrong_call = cli.call("resume", message_id, "--decision", "call_zzz=approve")
    assert wrong_call.code == 2 and "call_a" in wrong_call.err
    assert cli.call("resume", message_id, "--approve", "--deny").code == 2
    assert cli.call("resume", message_id, "--decision", "call_a=maybe").code == 2
    unknown = cli.call("resume", "nope", "--approve")
    assert unknown.code == 2 and "not found" in unknown.err
    assert cli.call("run", "x", "--parent", "m", "--new-root").code == 2
    assert cli.call("pending").out.count(message_id) == 1  # still paused
    missing = main(["--config-dir", str(tmp_path / "missing"), "pending"])
    assert missing == 2


def test_unexpected_error_is_one_line_unless_debug(cli: CLI, tmp_path: Path) -> None:
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x", encoding="utf-8")
    plain = cli.call("pending", "--data-dir", str(not_a_folder))
    assert plain.code == 1
    assert plain.err.count("\n") == 1 and "--debug" in plain.err and "Traceback" not in plain.err
    debug = cli.call("pending", "--data-dir", str(not_a_folder), "--debug")
    assert debug.code == 1 and "Traceback" in debug.err


def test_interactive_approval_over_a_pty(cli: CLI, llm: ScriptedLLM, tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    llm.script(append_call(target), Text("Appended interactively."))
    with in_pty(cli, "run", "append") as (proc, reader):
        reader.until("[a]pprove")
        os.write(reader.fd, b"e\n")
        reader.until("New arguments")
        os.write(reader.fd, b"{not json\n")
        reader.until("Not valid JSON")
        reader.until("New arguments")
        os.write(reader.fd, b'{"text": "no path"}\n')  # valid JSON, invalid for the tool's schema
        reader.until("invalid arguments")
        reader.until("[a]pprove")
        os.write(reader.fd, b"a\n")
        reader.until("✓ done")
        assert proc.wait(timeout=TIMEOUT) == 0
    assert "Appended interactively." in reader.text
    assert lines_of(target) == ["hello"]


def test_resume_asks_at_a_terminal_without_decision_flags(
    cli: CLI, llm: ScriptedLLM, tmp_path: Path
) -> None:
    target = tmp_path / "out.txt"
    llm.script(append_call(target), Text("Fine, not written."))
    message_id = MESSAGE_ID.search(cli.call("run", "append", "--no-input").out).group(1)  # type: ignore[union-attr]
    with in_pty(cli, "resume", message_id) as (proc, reader):
        reader.until("[a]pprove")
        os.write(reader.fd, b"d\n")
        reader.until("Reason")
        os.write(reader.fd, b"too risky\n")
        reader.until("✓ done")
        assert proc.wait(timeout=TIMEOUT) == 0
    assert "denied" in reader.text and not target.exists()
    assert "too risky" in json.dumps(llm.requests[-1]["messages"])


def test_first_ctrl_c_cancels_and_saves_the_partial_answer(cli: CLI, llm: ScriptedLLM) -> None:
    llm.script(Text("word " * 100, chunk_size=5, chunk_delay=0.2))
    with spawn(cli, "run", "talk slowly") as (proc, reader):
        reader.until("word word")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 130, err
    assert "cancelled" in err.decode() and "partial answer saved" in err.decode()
    message_id = MESSAGE_ID.search(reader.text).group(1)  # type: ignore[union-attr]
    events = [
        json.loads(line) for line in cli.call("events", message_id, "--json").out.splitlines()
    ]
    assert events[-1]["type"] == "cancelled"
    assert events[-1]["data"]["partial_response"].startswith("word word")
    conversation_id = events[-1]["conversation_id"]
    tree = json.loads(cli.call("history", conversation_id, "--json").out)
    assert tree["messages"][0]["status"] == "cancelled"


# --- inspection -----------------------------------------------------------------------------


def test_conversations_and_history_with_branches(cli: CLI, llm: ScriptedLLM) -> None:
    llm.script(Text("first answer"), Text("second answer"), Text("forked answer"), Text("other"))
    first = cli.call("run", "first question", "--no-input")
    conversation_id = CONVERSATION_ID.search(first.out).group(1)  # type: ignore[union-attr]
    first_id = MESSAGE_ID.search(first.out).group(1)  # type: ignore[union-attr]
    second = cli.call("run", "second question", "--conversation", conversation_id)
    second_id = MESSAGE_ID.search(second.out).group(1)  # type: ignore[union-attr]
    forked = cli.call(
        "run", "forked question", "--conversation", conversation_id, "--parent", first_id
    )
    forked_id = MESSAGE_ID.search(forked.out).group(1)  # type: ignore[union-attr]
    assert first.code == second.code == forked.code == 0
    other = cli.call("run", "another conversation")
    other_conversation = CONVERSATION_ID.search(other.out).group(1)  # type: ignore[union-attr]

    shown = cli.call("history", conversation_id)
    assert shown.code == 0
    assert all(i in shown.out for i in (first_id, second_id, forked_id))
    assert "(2 branches)" in shown.out
    assert re.search(rf"{forked_id} \[completed\] ◀ active", shown.out)
    assert "'forked question' → 'forked answer'" in shown.out

    tree = json.loads(cli.call("history", conversation_id, "--json").out)
    by_id = {m["id"]: m for m in tree["messages"]}
    assert tree["roots"] == [first_id]
    assert sorted(by_id[first_id]["children"]) == sorted([second_id, forked_id])
    assert by_id[forked_id]["active"] and not by_id[second_id]["active"]

    listed = json.loads(cli.call("conversations", "--json").out)
    assert listed["total"] == 2
    assert [c["id"] for c in listed["items"]] == [other_conversation, conversation_id]
    page = json.loads(cli.call("conversations", "--json", "--limit", "1", "--offset", "1").out)
    assert [c["id"] for c in page["items"]] == [conversation_id]
    text = cli.call("conversations").out
    assert text.index(other_conversation) < text.index(conversation_id)
    assert "first question" in text


def test_events_replay_after_id(cli: CLI, llm: ScriptedLLM) -> None:
    llm.script(Text("replayed"))
    message_id = MESSAGE_ID.search(cli.call("run", "hello").out).group(1)  # type: ignore[union-attr]
    every = [json.loads(line) for line in cli.call("events", message_id, "--json").out.splitlines()]
    assert [e["event_id"] for e in every] == list(range(1, len(every) + 1))
    assert every[-1]["type"] == "complete"
    later = [
        json.loads(line)
        for line in cli.call("events", message_id, "--after", "2", "--json").out.splitlines()
    ]
    assert [e["event_id"] for e in later] == list(range(3, len(every) + 1))
    plain = cli.call("events", message_id).out.splitlines()
    assert len(plain) == len(every) and "complete" in plain[-1] and "replayed" in plain[-1]
    followed = cli.call("events", message_id, "--follow", "--after", "1").out.splitlines()
    assert len(followed) == len(every) - 1


def test_gc_reports_and_removes_abandoned_pauses(
    cli: CLI, llm: ScriptedLLM, tmp_path: Path
) -> None:
    llm.script(append_call(tmp_path / "out.txt"))
    message_id = MESSAGE_ID.search(cli.call("run", "append", "--no-input").out).group(1)  # type: ignore[union-attr]
    dry = cli.call("gc", "--retention-hours", "0", "--dry-run")
    assert dry.code == 0 and "would remove" in dry.out and message_id in dry.out
    assert message_id in cli.call("pending").out
    done = cli.call("gc", "--retention-hours", "0")
    assert done.code == 0 and "removed 1 abandoned" in done.out and message_id in done.out
    assert cli.call("pending", "--json").out.strip() == "[]"
    assert cli.call("resume", message_id, "--approve").code == 5


def test_artifacts_list_show_diff_and_export(cli: CLI, llm: ScriptedLLM, tmp_path: Path) -> None:
    llm.script(
        ToolCalls(
            [
                Call(
                    "create_artifact",
                    {"id": "report", "title": "Report", "content": "# Report\n\nline one\n"},
                )
            ]
        ),
        ToolCalls(
            [
                Call(
                    "update_artifact",
                    {"id": "report", "old_str": "line one", "new_str": "line two"},
                )
            ]
        ),
        Text("Wrote the report."),
    )
    ran = cli.call("run", "write a report")
    assert ran.code == 0, ran.out + ran.err
    assert (
        "◆ artifact report created (v1)" in ran.out and "◆ artifact report updated → v2" in ran.out
    )
    conversation_id = CONVERSATION_ID.search(ran.out).group(1)  # type: ignore[union-attr]

    items = json.loads(cli.call("artifacts", conversation_id, "--json").out)
    assert [(i["artifact_id"], i["version"]) for i in items] == [("report", 2)]
    assert "report" in cli.call("artifacts", conversation_id).out
    current = cli.call("artifact", conversation_id, "report")
    assert "line two" in current.out and "version 2 of 2" in current.out
    assert "line one" in cli.call("artifact", conversation_id, "report", "--version", "1").out
    diff = cli.call("artifact", conversation_id, "report", "--diff", "1").out
    assert "-line one" in diff and "+line two" in diff and "report@v1" in diff
    target = tmp_path / "export" / "report.md"
    exported = cli.call("artifact", conversation_id, "report", "--export", str(target))
    assert exported.code == 0 and target.read_text(encoding="utf-8").startswith("# Report")
    missing = cli.call("artifact", conversation_id, "nope")
    assert missing.code == 2 and "report" in missing.err


def test_token_create_prints_the_token_last(cli: CLI) -> None:
    result = cli.call("token", "create", "alice")
    assert result.code == 0
    token = result.out.strip().splitlines()[-1]
    assert token.startswith("af_") and len(token) > 20
    stored = b"".join(p.read_bytes() for p in cli.data.glob("artifactflow.db*"))
    assert token.encode() not in stored  # stored hashed
