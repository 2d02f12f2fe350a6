"""A real full disk under the command line: a small tmpfs filled while a run streams (issue 34).

`test_faults_disk.py` makes SQLite refuse writes with `PRAGMA max_page_count` inside one
process. These tests use a real file system instead (a tmpfs, mounted for the test; root only)
and a real CLI process, because what broke was the process: the CLI printed its final
`error` and then never exited (its engine's close stopped at the first failed write and left
connection threads alive), and the message stayed `running` for good. Each CLI is forked from
the tests' CLI fork server (tests/cli_fork.py: `main()` in a process of its own, which ends as
the interpreter does, waiting for the threads that are not daemons), without the console
script's start-up imports.

What must hold:
- the CLI exits with code 1 within seconds of the failed write, never hangs;
- with the spare space every store keeps (`core/run/endings.py`), the run's own process stores
  its ending: the message is `failed`, the reason names the full disk, while the disk is full;
- without it (another process took the spare), the CLI leaves a marker and exits; once space
  is back, the next process that opens the store ends the message `failed` with the reason and
  a final `error` event, without any command, and `resume` then agrees (exit 1, not 130).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_fork import fork_cli, fork_cli_async, fork_piped
from cli_helpers import CLI
from conftest import make_config
from scripted_llm import Text
from waiting import wait_until

from artifactflow import Client, load_settings

TRIALS = int(os.environ.get("AF_DISK_FULL_TRIALS", "2"))
EXIT_SECONDS = 10.0  # from the full disk to the exit (start-up is long past by then)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 6 MB tmpfs of the test's own, unmounted at teardown."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (root needed): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(folder: Path) -> Path:
    """Write zeros until the file system refuses: ENOSPC for everyone from now on."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 65536)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"\0" * 512)
    finally:
        os.close(fd)
    return filler


def _row(data: Path, message_id: str) -> tuple[str, str | None]:
    conn = sqlite3.connect(data / "artifactflow.db")
    try:
        status, error = conn.execute(
            "SELECT status, error FROM af_messages WHERE id = ?", (message_id,)
        ).fetchone()
    finally:
        conn.close()
    return status, error


def _run_until_full(cli: CLI, llm: Any, *, take_spare: bool) -> tuple[int, float, str, str]:
    """Start `run` on the tmpfs, fill the disk mid-stream; (exit code, seconds from the full
    disk to the exit, stdout, stderr). Fails if the CLI does not exit in `EXIT_SECONDS`."""
    llm.script(Text("x" * 300_000, chunk_size=10_000, chunk_delay=0.1))  # ~3 s of streaming
    proc = fork_piped(cli.args("run", "--json", "a long answer"), cli.env())
    seen = b""
    deadline = time.monotonic() + 120
    while b'"agent_start"' not in seen:
        chunk = os.read(proc.stdout, 65536)
        assert chunk and time.monotonic() < deadline, f"the run never started: {seen!r}"
        seen += chunk
    if take_spare:
        (cli.data / "artifactflow.spare").unlink()  # another process used it up
    filler = _fill(cli.data.parent)
    full_at = time.monotonic()
    try:
        out, err = proc.communicate(timeout=EXIT_SECONDS)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate(timeout=60)
        pytest.fail(f"the CLI did not exit within {EXIT_SECONDS} s of the full disk:\n{err.decode()[-3000:]}")
    took = time.monotonic() - full_at
    filler.unlink()  # space returns
    return proc.returncode, took, (seen + out).decode(), err.decode()


def _message_id(out: str) -> str:
    import json

    for line in out.splitlines():
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if isinstance(event, dict) and event.get("message_id"):
                return str(event["message_id"])
    raise AssertionError(f"no message id in the output:\n{out[-2000:]}")


def test_a_full_disk_ends_the_run_in_its_own_process(tmpfs: Path, llm_env: Any, capsys: Any) -> None:
    cli = CLI(make_config(tmpfs.parent), tmpfs / "data", capsys)
    for _ in range(TRIALS):
        code, took, out, err = _run_until_full(cli, llm_env, take_spare=False)
        assert code == 1, (code, err[-2000:])
        assert took < EXIT_SECONDS
        assert "disk full" in out + err
        assert "Traceback" not in err, err
        status, error = _row(cli.data, _message_id(out))
        assert status == "failed" and error is not None and "disk full" in error, (status, error)


def test_without_spare_space_the_next_process_ends_the_run(tmpfs: Path, llm_env: Any, capsys: Any) -> None:
    cli = CLI(make_config(tmpfs.parent), tmpfs / "data", capsys)
    for _ in range(TRIALS):
        code, took, out, err = _run_until_full(cli, llm_env, take_spare=True)
        assert code == 1, (code, err[-2000:])
        assert took < EXIT_SECONDS
        message_id = _message_id(out)
        assert _row(cli.data, message_id)[0] == "running"  # nothing could be written
        assert list((cli.data / "endings").iterdir()), "no marker was left"

        events = asyncio.run(_reopen(cli, message_id))  # any process that opens the store; no command
        status, error = _row(cli.data, message_id)
        assert status == "failed" and error is not None and "disk full" in error, (status, error)
        assert events[-1].type == "error" and "disk full" in events[-1].data.message
        assert not list((cli.data / "endings").iterdir())
        assert (cli.data / "artifactflow.spare").exists()  # kept again, now that there is room
        code, out, err = fork_cli(cli.args("resume", message_id), cli.env(), 300)
        assert code == 1, (code, out, err)
        assert "disk full" in out + err, (out, err)


async def _reopen(cli: CLI, message_id: str) -> list[Any]:
    """Open the store as any process would; the message's stored events."""
    client = await Client.open(load_settings(cli.config, cli.data))
    try:
        return await client.runs.events(message_id)
    finally:
        await client.aclose()


def test_a_disk_io_error_on_a_nearly_full_disk_is_named_disk_full(tmpfs: Path) -> None:
    from artifactflow.core.store.faults import UNAVAILABLE, store_fault, watch_free_space

    watch_free_space(tmpfs)
    error = sqlite3.OperationalError("disk I/O error")
    fault = store_fault(error)
    assert fault is not None and fault.reason == UNAVAILABLE  # plenty of room: not the disk
    filler = _fill(tmpfs)
    try:
        fault = store_fault(error)
        assert fault is not None and fault.reason == "disk full", fault
        assert "disk I/O error" in str(fault)
    finally:
        filler.unlink()


async def test_a_running_server_stores_an_ending_left_by_a_stopped_process(
    tmp_path: Path, llm_env: Any, capsys: Any
) -> None:
    """The maintenance loop (`workers.py`, every few seconds) stores a marked ending while the
    server runs: no restart, no command."""
    from scripted_llm import Hang

    from artifactflow.core.run.endings import Spare

    cli = CLI(make_config(tmp_path), tmp_path / "data", capsys)
    server = await Client.open(load_settings(cli.config, cli.data))  # a server's engine
    try:
        llm_env.script(Hang())
        proc = await fork_cli_async(cli.args("run", "--json", "hang"), cli.env())
        assert proc.stdout is not None
        seen = b""
        while b'"agent_start"' not in seen:
            line = await proc.stdout.readline()
            assert line, seen
            seen += line
        proc.kill()  # it stopped with its ending unstored
        await proc.wait()
        message_id = _message_id(seen.decode())
        message = await server.conversations.message(message_id)
        assert message["status"] == "running"
        # the marker the stopped process would have left (`outage.py`), for a full disk
        assert Spare(cli.data, sqlite=True).mark(message_id, message["run_token"], "disk full")

        async def ended() -> Any:
            row = await server.conversations.message(message_id)
            return row if row["status"] != "running" else None

        row = await wait_until(ended, timeout=120, what="the ending stored by the maintenance loop")
        assert row["status"] == "failed" and "disk full" in (row["error"] or ""), row
        events = await server.runs.events(message_id)
        assert events[-1].type == "error" and "disk full" in events[-1].data.message
        assert not list((cli.data / "endings").iterdir())
    finally:
        await server.aclose()
