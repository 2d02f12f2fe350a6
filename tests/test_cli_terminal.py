"""The command line as a person meets it: short `#N` handles for pending tool calls, Markdown
answers and a spinner on a terminal (plain text in a pipe), Ctrl-C while starting or
streaming, and one data folder whatever the working directory.

Everything runs in processes of its own against the scripted model over HTTP: the real console
script where the test is about the process (a pseudo-terminal, Ctrl-C), else `main()` forked
from a server that imported the CLI once (`CLI.fork`, tests/cli_fork.py: a pause answered by
another process, output to a pipe, the working directory). A terminal is either a real
pseudo-terminal (`in_pty`) or rich's own switch `TTY_COMPATIBLE=1` on a pipe (with
`TTY_INTERACTIVE=0`, no spinner, so the output is just the rendered text).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from cli_fork import fork_cli
from cli_helpers import (
    ANSI,
    ARTIFACTFLOW,
    CLI,
    CONVERSATION_ID,
    MESSAGE_ID,
    TIMEOUT,
    Reader,
    in_pty,
    lines_of,
    make_cli,
    spawn,
)
from conftest import make_config
from scripted_llm import Call, ScriptedLLM, Text, ToolCalls

from artifactflow.cli import main as cli_main

ANSWER = "# Plan\n\nUse **SQLite** first, then `PostgreSQL`.\n\n- one\n- two\n"


@pytest.fixture
def cli(tmp_path: Path, llm_env: ScriptedLLM, capsys: pytest.CaptureFixture[str]) -> CLI:
    return make_cli(tmp_path, capsys)


def two_calls(path: Path) -> ToolCalls:
    return ToolCalls(
        [
            Call("append_line", {"path": str(path), "text": "first"}, id="call_first_long_id"),
            Call("append_line", {"path": str(path), "text": "second"}, id="call_second_long_id"),
        ]
    )


def paused_with_two_calls(cli: CLI, llm: ScriptedLLM, target: Path) -> str:
    llm.script(two_calls(target), Text("Done."))
    paused = cli.fork("run", "append twice", "--no-input")
    assert paused.code == 3, paused.err
    assert "#1  call_first_long_id  append_line" in paused.out
    assert "#2  call_second_long_id  append_line" in paused.out
    return MESSAGE_ID.search(paused.out).group(1)  # type: ignore[union-attr]


# --- decision handles ------------------------------------------------------------------------


def test_decisions_take_the_numbers_shown(cli: CLI, llm: ScriptedLLM, tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    message_id = paused_with_two_calls(cli, llm, target)
    assert "#2  call_second_long_id" in cli.call("pending").out

    resumed = cli.fork("resume", message_id, "--decision", "#1=approve", "--decision", "2=deny")

    assert resumed.code == 0, resumed.err
    assert lines_of(target) == ["first"]
    assert "deny append_line (call_second_long_id)" in resumed.out


def test_a_full_id_still_works_and_an_unknown_handle_lists_the_valid_ones(
    cli: CLI, llm: ScriptedLLM, tmp_path: Path
) -> None:
    target = tmp_path / "out.txt"
    message_id = paused_with_two_calls(cli, llm, target)

    refused = cli.fork("resume", message_id, "--decision", "#3=approve", "--decision", "1=approve")

    assert refused.code == 2
    assert "no pending tool call '#3'" in refused.err
    assert "#1 (call_first_long_id), #2 (call_second_long_id)" in refused.err
    assert message_id in cli.call("pending").out and not target.exists()  # still paused
    both = cli.fork(
        "resume", message_id, "--decision", "call_first_long_id=approve", "--decision", "#2=approve"
    )
    assert both.code == 0, both.err
    assert sorted(lines_of(target)) == ["first", "second"]  # approved calls run concurrently


# --- rendering --------------------------------------------------------------------------------


def test_the_answer_is_markdown_on_a_terminal_and_plain_in_a_pipe(
    cli: CLI, llm: ScriptedLLM
) -> None:
    llm.script(Text(ANSWER), Text(ANSWER))

    piped = cli.fork("run", "plan it")
    terminal = cli.fork("run", "plan it", env=cli.env(TTY_COMPATIBLE="1", TTY_INTERACTIVE="0"))

    assert piped.code == terminal.code == 0, (piped.err, terminal.err)
    assert "Use **SQLite** first, then `PostgreSQL`." in piped.out  # the text as the model wrote it
    assert "- one" in piped.out
    rendered = ANSI.sub("", terminal.out)
    assert "**" not in rendered and "`" not in rendered and "# Plan" not in rendered
    assert "Use SQLite first, then PostgreSQL." in rendered
    assert "• one" in rendered and "Plan" in rendered


def test_a_terminal_shows_the_step_being_waited_on(cli: CLI, llm: ScriptedLLM) -> None:
    llm.script(Text("word " * 30, chunk_size=5, chunk_delay=0.1))
    with in_pty(cli, "run", "talk slowly") as (proc, reader):
        reader.until("writing… ")
        reader.until(" s")  # with its elapsed time
        reader.until("✓ done")
        assert proc.wait(timeout=TIMEOUT) == 0
    assert "word word" in reader.text


# --- Ctrl-C -----------------------------------------------------------------------------------


SLOW_PLUGIN = """
import os, sys, time

print("plugin loading", file=sys.stderr, flush=True)
while not os.path.exists(os.environ["AF_GO_ON"]):  # the test says when start-up may go on
    time.sleep(0.02)
"""


def test_ctrl_c_while_starting_prints_one_line_and_exits_130(
    tmp_path: Path, llm_env: ScriptedLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    config = make_config(
        tmp_path, yaml_text="plugins: [slow_start]\n", plugin_files={"slow_start.py": SLOW_PLUGIN}
    )
    cli = CLI(config, tmp_path / "data", capsys)
    go_on = tmp_path / "go-on"
    env = cli.env(AF_GO_ON=str(go_on))
    proc = subprocess.Popen(
        [ARTIFACTFLOW, *cli.args("run", "hello")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stderr is not None
    reader = Reader(proc.stderr.fileno())
    reader.until("plugin loading")
    proc.send_signal(signal.SIGINT)
    go_on.touch()
    _, rest = proc.communicate(timeout=TIMEOUT)

    err = (reader.raw + rest).decode()
    assert proc.returncode == 130, err
    assert err.splitlines() == ["plugin loading", "✗ interrupted (Ctrl-C): stopped"]
    assert llm_env.requests == []  # nothing ran


def test_ctrl_c_while_the_command_line_loads_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def loading(argv: list[str] | None = None) -> None:
        raise KeyboardInterrupt  # as if Ctrl-C landed inside `import typer`

    monkeypatch.setattr(cli_main, "_load", loading)
    assert cli_main.main(["conversations"]) == 130
    out, err = capsys.readouterr()
    assert out == "" and err == cli_main.STARTUP_INTERRUPTED + "\n"


def test_ctrl_c_while_streaming_prints_one_line_with_the_message(
    cli: CLI, llm: ScriptedLLM
) -> None:
    llm.script(Text("word " * 100, chunk_size=5, chunk_delay=0.2))
    with spawn(cli, "run", "talk slowly") as (proc, reader):
        reader.until("word word")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 130, err
    message_id = MESSAGE_ID.search(reader.text).group(1)  # type: ignore[union-attr]
    (line,) = err.decode().splitlines()
    assert line.startswith("✗ cancelled · partial answer saved (") and line.endswith(message_id)


# --- the data folder --------------------------------------------------------------------------


def run_in(folder: Path, config: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """The command line in a process of its own working in `folder`, with no data folder
    configured (forked: tests/cli_fork.py)."""
    folder.mkdir(parents=True, exist_ok=True)
    argv = ["--config-dir", str(config), *args]
    code, out, err = fork_cli(argv, CLI.env(**env), TIMEOUT, cwd=str(folder))
    return subprocess.CompletedProcess(argv, code, out, err)


def listed(proc: subprocess.CompletedProcess[str]) -> list[str]:
    assert proc.returncode == 0, proc.stderr
    return [row["id"] for row in json.loads(proc.stdout)["items"]]


def test_every_directory_lists_the_same_conversations(
    tmp_path: Path, llm_env: ScriptedLLM, user_data_home: Path
) -> None:
    config = make_config(tmp_path)
    llm_env.script(Text("hello back"))
    ran = run_in(tmp_path / "one", config, "run", "hello")
    assert ran.returncode == 0, ran.stderr
    conversation_id = CONVERSATION_ID.search(ran.stdout).group(1)  # type: ignore[union-attr]

    assert listed(run_in(tmp_path / "one", config, "conversations", "--json")) == [conversation_id]
    assert listed(run_in(tmp_path / "two", config, "conversations", "--json")) == [conversation_id]
    assert (user_data_home / "artifactflow" / "artifactflow.db").is_file()
    assert not (tmp_path / "one" / "data").exists()


def test_an_old_data_folder_is_reported_not_used_and_never_moved(
    tmp_path: Path, llm_env: ScriptedLLM
) -> None:
    config = make_config(tmp_path)
    old = tmp_path / "project" / "data"
    llm_env.script(Text("old answer"))
    made = run_in(tmp_path / "project", config, "run", "old", ARTIFACTFLOW_DATA_DIR=str(old))
    assert made.returncode == 0, made.stderr
    old_id = CONVERSATION_ID.search(made.stdout).group(1)  # type: ignore[union-attr]
    before = sorted(p.name for p in old.iterdir())

    found = run_in(tmp_path / "project", config, "conversations", "--json")

    assert listed(found) == []  # the new default folder, empty
    (notice,) = found.stderr.splitlines()
    assert f"found data of an older artifactflow in {old.resolve()}" in notice
    assert f"ARTIFACTFLOW_DATA_DIR={old.resolve()}" in notice and "Nothing was moved" in notice
    assert sorted(p.name for p in old.iterdir()) == before
    kept = run_in(
        tmp_path / "project", config, "conversations", "--json", ARTIFACTFLOW_DATA_DIR="data"
    )
    assert listed(kept) == [old_id] and kept.stderr == ""
    elsewhere = run_in(tmp_path / "other", config, "conversations", "--json")
    assert elsewhere.stderr == ""  # only where such a folder is


def test_the_spinner_stays_out_of_pipes(cli: CLI, llm: ScriptedLLM) -> None:
    llm.script(Text("word " * 10, chunk_size=5, chunk_delay=0.05))
    piped = cli.fork("run", "talk")
    assert piped.code == 0, piped.err
    assert "…" not in piped.out and "\x1b" not in piped.out + piped.err
    assert os.linesep.join(["word " * 10]).strip() in piped.out
