"""CLI processes without the import cost: a fork server for tests that need a process of
their own (a run SIGKILLed mid-way, a pause answered by another process, a `serve` worker
killed under load) but are not about the console script's start-up.

A test that SIGKILLs `artifactflow run` at some point of its work needs a real process to
kill, but not a fresh interpreter: what it asserts is what the stored state looks like after
the kill, not how the console script starts. Starting the console script imports the run path
(LangGraph, openai, SQLAlchemy, pydantic models: ~3-4 CPU seconds on the two-core test
machine) every time; a test with ten kill points spends most of its CPU there.

`python tests/cli_fork.py` (the server, one per test process, started on first use) imports
that path once and then, per request, forks a child that calls `artifactflow.cli.main.main`
with the request's arguments, environment, working folder and standard streams (passed over a
Unix socket), and exits with its code (or runs a `python -c` script: `fork_python`). The child is a separate process like the console
script's: it is killed with real signals, holds its own database connections and leases, and
its exit status comes back through the socket. Tests about the process itself (startup,
exit codes of the installed binary, signals before `main()` runs) keep the console script.

The server runs no thread and no event loop, so forking it is safe; it ends when its stdin
(a pipe from the test process) closes.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import select
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

_MAX_FDS = 3


# --- the server ------------------------------------------------------------------------------


def _exit_like_the_interpreter(code: int) -> NoReturn:
    """End a forked child as the console script's `sys.exit(main())` ends: wait for the
    threads that are not daemons (a CLI that left one running never exits, here too), run
    the `atexit` functions, flush the standard streams; then exit at once, skipping the
    teardown of every module (half a CPU second that shows nothing)."""
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def _exit_code(stop: SystemExit) -> int:
    if isinstance(stop.code, int):
        return stop.code
    if stop.code is not None:
        print(stop.code, file=sys.stderr)
        return 1
    return 0


def _run_code(source: str) -> int:
    """Run a `python -c` script as `__main__`; its exit code as the interpreter gives it
    (an uncaught exception: the traceback on stderr, 1)."""
    import traceback

    try:
        exec(compile(source, "<string>", "exec"), {"__name__": "__main__"})
    except SystemExit as stop:
        return _exit_code(stop)
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def _serve(path: str) -> None:
    import random

    from artifactflow.cli import main as cli_main

    cli_main._load()  # every command module, as the console script's `main()` would import
    # the run path's heavy imports, so a child starts with them (lazy in the CLI)
    import langgraph.graph  # noqa: F401
    import openai  # noqa: F401
    import sqlalchemy.ext.asyncio  # noqa: F401
    import uvicorn  # noqa: F401  (`serve`)

    import artifactflow.api.app  # noqa: F401
    import artifactflow.client  # noqa: F401

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    children: dict[int, socket.socket] = {}
    while True:
        ready, _, _ = select.select([listener, sys.stdin, wake_r], [], [])
        if sys.stdin in ready and not os.read(sys.stdin.fileno(), 4096):
            break  # the test process ended
        if wake_r in ready:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = children.pop(pid, None)
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
                conn.close()
        if listener in ready:
            conn, _ = listener.accept()
            message, fds, _, _ = socket.recv_fds(conn, 1 << 20, _MAX_FDS)
            request = json.loads(message)
            pid = os.fork()
            if pid == 0:  # the child: becomes the CLI
                signal.set_wakeup_fd(-1)
                # the signal dispositions a fresh interpreter starts with
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGPIPE, signal.SIG_IGN)
                signal.signal(signal.SIGINT, signal.default_int_handler)
                for other in (listener, conn, *children.values()):
                    other.close()
                os.close(wake_r)
                os.close(wake_w)
                for target, fd in enumerate(fds):
                    os.dup2(fd, target)
                    os.close(fd)
                os.environ.clear()
                os.environ.update(request["env"])
                os.chdir(request["cwd"])
                random.seed()
                if "code" in request:  # `python -c CODE ARGS...`
                    sys.argv = ["-c", *request["args"]]
                    _exit_like_the_interpreter(_run_code(request["code"]))
                sys.argv = ["artifactflow", *request["args"]]
                try:
                    code = cli_main.main(request["args"])
                except SystemExit as stop:  # as the interpreter maps it
                    code = _exit_code(stop)
                _exit_like_the_interpreter(code)
            for fd in fds:
                os.close(fd)
            conn.sendall(f"{pid}\n".encode())
            children[pid] = conn
    for pid in children:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


# --- the client ------------------------------------------------------------------------------


class _Server:
    """This test process's fork server, started on first use."""

    _lock = threading.Lock()
    _proc: subprocess.Popen[bytes] | None = None
    _path: str | None = None

    @classmethod
    def path(cls) -> str:
        shared = os.environ.get(SHARED)
        if shared:  # the one the xdist controller started for every worker (`start_shared`)
            return shared
        with cls._lock:
            if cls._proc is None or cls._proc.poll() is not None:
                folder = tempfile.mkdtemp(prefix="af-fork-")
                cls._path = str(Path(folder) / "s")
                env = {k: v for k, v in os.environ.items() if not k.startswith("ARTIFACTFLOW_")}
                env.update(NO_COLOR="1", PYTHONUNBUFFERED="1")
                cls._proc = subprocess.Popen(
                    [sys.executable, __file__, cls._path],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    env=env,
                )
                assert cls._proc.stdout is not None
                line = cls._proc.stdout.readline()  # waits for the imports: no timeout needed
                if line != b"ready\n":
                    raise RuntimeError(f"the CLI fork server did not start: {line!r}")
            assert cls._path is not None
            return cls._path

    @classmethod
    def stop(cls) -> None:
        """End the server (closing its stdin) and wait for it."""
        with cls._lock:
            if cls._proc is not None:
                assert cls._proc.stdin is not None and cls._proc.stdout is not None
                cls._proc.stdin.close()
                cls._proc.wait()
                cls._proc.stdout.close()
                cls._proc = None


def stop() -> None:
    _Server.stop()


# A fork server shared by the test processes of one run: its socket, in their environment.
SHARED = "AF_TEST_FORK_SERVER"


def start_shared() -> None:
    """Start this process's server now and name it in the environment, so the processes it
    starts next (pytest-xdist's workers) fork from it instead of each starting its own (the
    imports, ~3.5 CPU seconds, once per run instead of once per worker). `stop()` ends it."""
    os.environ[SHARED] = _Server.path()


def stop_shared() -> None:
    os.environ.pop(SHARED, None)
    _Server.stop()


def _request(
    args: list[str], env: dict[str, str], cwd: str | None, fds: list[int], code: str | None = None
) -> socket.socket:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(_Server.path())
    request: dict[str, object] = {"args": args, "env": env, "cwd": cwd or os.getcwd()}
    if code is not None:
        request["code"] = code
    body = json.dumps(request).encode()
    socket.send_fds(conn, [body], fds)
    return conn


def _read_line(conn: socket.socket) -> bytes:
    """One line of the server's (a byte at a time: the pid and the exit code can arrive
    together, and the second is read later)."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(1)
        if not chunk:
            raise RuntimeError("the CLI fork server closed the connection")
        data += chunk
    return data


@dataclass
class ForkedCLI:
    """A forked `artifactflow` process: its pid, and its exit code once it ended."""

    pid: int
    conn: socket.socket
    returncode: int | None = None

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class ForkedProcess(ForkedCLI):
    """A forked CLI that runs on (a server: `serve`), used as `subprocess.Popen` is:
    `poll`, `wait`, `send_signal`, `kill`, `terminate`."""

    def poll(self) -> int | None:
        if self.returncode is None:
            self.conn.setblocking(False)
            try:
                ended = self.conn.recv(1, socket.MSG_PEEK)
            except BlockingIOError:
                return None
            finally:
                self.conn.setblocking(True)
            if ended:
                self.returncode = int(_read_line(self.conn))
                self.conn.close()
            else:
                raise RuntimeError("the CLI fork server closed the connection")
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.conn.settimeout(timeout)
            try:
                self.returncode = int(_read_line(self.conn))
            except TimeoutError:
                self.conn.settimeout(None)
                raise subprocess.TimeoutExpired(["artifactflow"], timeout or 0.0) from None
            self.conn.close()
        return self.returncode

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def _read_to_end(streams: dict[int, bytearray], deadline: float) -> bool:
    """Read every pipe in `streams` into its buffer until all are closed (True) or until
    `deadline` (False: the child still holds one open)."""
    with selectors.DefaultSelector() as selector:
        for fd in streams:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            for key, _ in selector.select(left):
                chunk = os.read(key.fd, 65536)
                if chunk:
                    streams[key.fd] += chunk
                else:
                    selector.unregister(key.fd)
    return True


@dataclass
class PipedForkedProcess(ForkedProcess):
    """A forked CLI whose stdout and stderr are pipes to this process (`stdout`, `stderr`:
    their read ends), as `subprocess.Popen(..., stdout=PIPE, stderr=PIPE)` gives."""

    stdout: int = -1
    stderr: int = -1

    def communicate(self, timeout: float) -> tuple[bytes, bytes]:
        """The rest of its output, once it exited; `subprocess.TimeoutExpired` (it is left
        running) when it has not closed its streams after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        out, err = bytearray(), bytearray()
        streams = {fd: buffer for fd, buffer in ((self.stdout, out), (self.stderr, err)) if fd >= 0}
        if not _read_to_end(streams, deadline):
            raise subprocess.TimeoutExpired(["artifactflow"], timeout)
        self.wait(max(deadline - time.monotonic(), 1.0))
        self.close()
        return bytes(out), bytes(err)

    def close(self) -> None:
        for fd in (self.stdout, self.stderr):
            if fd >= 0:
                os.close(fd)
        self.stdout = self.stderr = -1


def fork_piped(args: list[str], env: dict[str, str]) -> PipedForkedProcess:
    """`artifactflow *args` forked from the server and left running, stdin on /dev/null, its
    stdout and stderr piped here."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        conn = _request(args, env, None, [devnull, out_w, err_w])
    finally:
        for fd in (out_w, err_w, devnull):
            os.close(fd)
    return PipedForkedProcess(int(_read_line(conn)), conn, stdout=out_r, stderr=err_r)


def fork_on(args: list[str], env: dict[str, str], fd: int) -> ForkedProcess:
    """`artifactflow *args` forked from the server and left running, its stdin, stdout and
    stderr on `fd` (a pseudo-terminal's side, as `subprocess.Popen(stdin=fd, stdout=fd,
    stderr=fd)` puts them)."""
    conn = _request(args, env, None, [fd, fd, fd])
    return ForkedProcess(int(_read_line(conn)), conn)


def fork_python(
    code: str, args: list[str], env: dict[str, str], timeout: float, cwd: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -c code *args` forked from the server (the run path already imported), run to
    its end, as `subprocess.run(..., capture_output=True, text=True)` returns it."""
    returncode, out, err = fork_cli(args, env, timeout, cwd, code=code)
    return subprocess.CompletedProcess(["python", "-c", "...", *args], returncode, out, err)


def fork_process(
    args: list[str], env: dict[str, str], *, code: str | None = None, log: Path | None = None
) -> ForkedProcess:
    """`artifactflow *args` (or `python -c code *args`) forked from the server and left
    running, its standard streams on /dev/null (what `subprocess.Popen(..., stdout=DEVNULL,
    stderr=DEVNULL)` gives); with `log`, its stdout and stderr go to that file instead."""
    devnull = os.open(os.devnull, os.O_RDWR)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if log is not None else devnull
    try:
        conn = _request(args, env, None, [devnull, out, out], code)
    finally:
        os.close(devnull)
        if out != devnull:
            os.close(out)
    return ForkedProcess(int(_read_line(conn)), conn)


class AsyncForkedCLI(ForkedCLI):
    """A forked CLI for asyncio tests: `stdout` is a StreamReader, `wait()` a coroutine
    (what `kill_at` uses of an `asyncio.subprocess.Process`)."""

    stdout: asyncio.StreamReader
    transport: asyncio.BaseTransport | None = None

    async def wait(self) -> int:
        if self.returncode is None:
            loop = asyncio.get_running_loop()
            self.conn.setblocking(False)
            data = b""
            while not data.endswith(b"\n"):
                chunk = await loop.sock_recv(self.conn, 1)  # only what is left after the pid
                if not chunk:
                    raise RuntimeError("the CLI fork server closed the connection")
                data += chunk
            self.returncode = int(data)
            self.conn.close()
        if self.transport is not None:
            self.transport.close()
        return self.returncode


def fork_cli(
    args: list[str], env: dict[str, str], timeout: float, cwd: str | None = None, *, code: str | None = None
) -> tuple[int, str, str]:
    """`artifactflow *args` (or, with `code`, `python -c code *args`) forked from the server,
    run to its end: (exit code, stdout, stderr); stdin is /dev/null. A child still running
    after `timeout` seconds (a hang) is killed and the call fails."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        conn = _request(args, env, cwd, [devnull, out_w, err_w], code)
    finally:
        for fd in (out_w, err_w, devnull):
            os.close(fd)
    deadline = time.monotonic() + timeout
    streams = {out_r: bytearray(), err_r: bytearray()}
    try:
        pid = int(_read_line(conn))
        if not _read_to_end(streams, deadline):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            raise AssertionError(f"artifactflow {args} still ran after {timeout:.0f} s")
        conn.settimeout(max(deadline - time.monotonic(), 1.0))
        code = int(_read_line(conn))
    finally:
        conn.close()
        for fd in streams:
            os.close(fd)
    return code, streams[out_r].decode(), streams[err_r].decode()


async def fork_python_async(code: str, args: list[str], env: dict[str, str]) -> AsyncForkedCLI:
    """`python -c code *args` forked from the server and left running, its standard streams
    on /dev/null; `kill()` and `await wait()` as an `asyncio.subprocess.Process`."""
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        conn = await asyncio.to_thread(_request, args, env, None, [devnull, devnull, devnull], code)
    finally:
        os.close(devnull)
    return AsyncForkedCLI(int(await asyncio.to_thread(_read_line, conn)), conn)


async def fork_cli_async(args: list[str], env: dict[str, str], *, stderr_to_null: bool = True) -> AsyncForkedCLI:
    """`artifactflow *args` forked from the server, its stdout piped to this event loop
    (stdin and, unless told otherwise, stderr: /dev/null)."""
    read_end, write_end = os.pipe()
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        # in a thread: the first request waits for the server's imports (seconds)
        conn = await asyncio.to_thread(_request, args, env, None, [devnull, write_end, devnull if stderr_to_null else 2])
    finally:
        os.close(write_end)
        os.close(devnull)
    pid = int(await asyncio.to_thread(_read_line, conn))
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    pipe = os.fdopen(read_end, "rb", buffering=0)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    proc = AsyncForkedCLI(pid, conn)
    proc.stdout, proc.transport = reader, transport
    return proc


def command(*, python: str = sys.executable) -> list[str]:
    """A command that is `artifactflow` forked from this test process's server, for a program
    the test starts that itself runs `artifactflow` (scripts/real-model-check): append the
    arguments. It runs `_forward`: a process with no import but the standard library's."""
    return [python, __file__, "--forward", _Server.path()]


def _forward(path: str, args: list[str]) -> NoReturn:
    """`artifactflow *args` forked from the server at `path`, with this process's environment,
    folder and standard streams; exits with its exit code (128 + N for a signal N, as a shell
    says it). A SIGTERM or SIGINT sent here is passed on to it."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    body = json.dumps({"args": args, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    socket.send_fds(conn, [body], [0, 1, 2])
    pid = int(_read_line(conn))
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda number, _frame: os.kill(pid, number))
    code = int(_read_line(conn))
    os._exit(128 - code if code < 0 else code)


if __name__ == "__main__":
    if sys.argv[1] == "--forward":
        _forward(sys.argv[2], sys.argv[3:])
    _serve(sys.argv[1])
