"""Shared helpers of the CLI tests: the console script in a subprocess or `main()` in-process,
a reader that waits for output (observable state, never time), and a CONFIRM file tool.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cli_fork import ForkedProcess, PipedForkedProcess, fork_cli, fork_on, fork_piped
from conftest import make_config
from scripted_llm import Call, ToolCalls
from waiting import ceiling

from artifactflow.cli.main import main

ARTIFACTFLOW = str(Path(sys.executable).parent / "artifactflow")
TIMEOUT = ceiling(300)  # catches a hung CLI; a slow start on a busy machine passes

PLUGIN = '''
from artifactflow import tool

@tool
def append_line(path: str, text: str) -> str:
    """Append one line of text to a file."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text + "\\n")
    return "appended"
'''
CONFIRM_YAML = "plugins: [file_tools]\npermissions: {append_line: confirm}\n"
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[=>]")
MESSAGE_ID = re.compile(r"message ([0-9a-f]{32})")
CONVERSATION_ID = re.compile(r"conversation ([0-9a-f]{32})")


@dataclass
class Result:
    code: int
    out: str
    err: str


@dataclass
class CLI:
    config: Path
    data: Path
    capsys: pytest.CaptureFixture[str]

    def args(self, *args: str) -> list[str]:
        return ["--config-dir", str(self.config), "--data-dir", str(self.data), *args]

    @staticmethod
    def env(**changes: str | None) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("ARTIFACTFLOW_")}
        env.update(NO_COLOR="1", PYTHONUNBUFFERED="1")
        for key, value in changes.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def sub(self, *args: str, env: dict[str, str] | None = None) -> Result:
        """The real console script in a new process (stdin is not a terminal)."""
        proc = subprocess.run(
            [ARTIFACTFLOW, *self.args(*args)],
            env=env or self.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    def fork(self, *args: str, env: dict[str, str] | None = None) -> Result:
        """`main()` in a new process forked from a server that imported the CLI once
        (tests/cli_fork.py): its own process, stdout, stderr and exit code, as the console
        script's, without the console script's start-up (stdin is not a terminal). For what
        crosses processes (a pause answered by another process); the start-up itself is
        `sub`'s."""
        code, out, err = fork_cli(self.args(*args), env or self.env(), TIMEOUT)
        return Result(code, out, err)

    def call(self, *args: str) -> Result:
        """`main()` in this process, for commands that only read stored data."""
        self.capsys.readouterr()
        code = main(self.args(*args))
        out, err = self.capsys.readouterr()
        return Result(code, out, err)


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def append_call(path: Path, text: str = "hello", call_id: str = "call_a") -> ToolCalls:
    return ToolCalls([Call("append_line", {"path": str(path), "text": text}, id=call_id)])


class Reader:
    """Reads a file descriptor (pipe or pty master) until a pattern shows up, with a timeout."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.raw = b""
        self.pos = 0

    @property
    def text(self) -> str:
        return ANSI.sub("", self.raw.decode("utf-8", errors="replace")).replace("\r", "")

    def until(self, needle: str, timeout: float | None = None) -> str:
        deadline = time.monotonic() + (TIMEOUT if timeout is None else timeout)
        while True:
            found = self.text.find(needle, self.pos)
            if found >= 0:
                self.pos = found + len(needle)
                return self.text
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"{needle!r} did not appear; got:\n{self.text}")
            ready, _, _ = select.select([self.fd], [], [], min(left, 0.2))
            if ready:
                try:
                    chunk = os.read(self.fd, 4096)
                except OSError:  # pty closed: the child exited
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"output ended before {needle!r}:\n{self.text}")
                self.raw += chunk


def make_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> CLI:
    """A config whose lead has `append_line` (CONFIRM) and the artifact tools."""
    config = make_config(
        tmp_path,
        lead_tools=["append_line", "create_artifact", "update_artifact"],
        yaml_text=CONFIRM_YAML,
        plugin_files={"file_tools.py": PLUGIN},
    )
    return CLI(config, tmp_path / "data", capsys)


# `spawn` and `in_pty` fork the CLI from the tests' fork server (tests/cli_fork.py): `main()`
# in a process of its own, with signals as a fresh interpreter has them once `main()` runs,
# and ending as the interpreter ends; what these tests check (signals during a run, prompts
# and rendering on a terminal) comes after the start-up, which the console script's tests
# check (test_cli_first_hour.py, `test_ctrl_c_while_starting_prints_one_line_and_exits_130`).


@contextmanager
def spawn(cli: CLI, *args: str, env: dict[str, str] | None = None) -> Iterator[tuple[PipedForkedProcess, Reader]]:
    """The CLI with piped output (`communicate`, `send_signal`, `wait` as on a `Popen`); the
    reader follows its stdout."""
    proc = fork_piped(cli.args(*args), env or cli.env())
    try:
        yield proc, Reader(proc.stdout)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.close()


@contextmanager
def in_pty(cli: CLI, *args: str) -> Iterator[tuple[ForkedProcess, Reader]]:
    """The CLI with stdin, stdout and stderr on a pseudo-terminal."""
    master, slave = pty.openpty()
    try:
        proc = fork_on(cli.args(*args), cli.env(), slave)
    finally:
        os.close(slave)
    try:
        yield proc, Reader(master)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)


async def kill_at(proc: Any, point: str, delay: float, read_timeout: float) -> Counter[str]:
    """Read a `--json` CLI's events until it printed `point` (its n-th, with `#n`), wait
    `delay`, then SIGKILL it; the count of each event type it printed."""
    assert proc.stdout is not None
    seen: Counter[str] = Counter()
    name, _, nth = point.partition("#")
    try:
        while line := await asyncio.wait_for(proc.stdout.readline(), read_timeout):
            with contextlib.suppress(ValueError):
                seen[json.loads(line).get("type")] += 1
            if seen[name] == int(nth or 1):
                await asyncio.sleep(delay)
                break
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGKILL)
        await proc.wait()
    return seen
