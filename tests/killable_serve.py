"""`artifactflow serve` processes for the kill tests and benchmarks/torture.py: started,
SIGKILLed and restarted on their own port; and an SSE reader that keeps what a client saw
before its server died.

Every server gets `run.recover_on_start` and a short lease through the environment (not the
YAML, which the benchmark's own in-process client also reads): a killed worker's runs are
taken over by a surviving worker, or by the same server restarted, once its lease lapses.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

LEASE_SECONDS = 2.0
SERVE_ENV = {
    "ARTIFACTFLOW_RUN__RECOVER_ON_START": "true",
    "ARTIFACTFLOW_RUN__LEASE_SECONDS": str(LEASE_SECONDS),
    "ARTIFACTFLOW_WEBHOOKS__ALLOW_PRIVATE": "true",  # the counting receiver is on 127.0.0.1
    "ARTIFACTFLOW_WEBHOOKS__BACKOFF_SECONDS": "0.05",
}
FINAL_EVENTS = {"complete", "error", "cancelled", "permission_request"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Serve:
    """One `serve` process on a fixed port: `kill()` is a SIGKILL, `start()` brings it back."""

    def __init__(self, command: list[str], env: dict[str, str], *, forked: bool = False) -> None:
        """`command`: the console script and its global options. `forked`: the process is
        forked from the tests' CLI fork server (tests/cli_fork.py: no start-up imports, the
        same `main()` and signals) instead of started from the console script."""
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self._command = [*command, "serve", "--host", "127.0.0.1", "--port", str(self.port)]
        self._env = {**env, **SERVE_ENV}
        self._forked = forked
        self.proc: Any = None  # a subprocess.Popen, or cli_fork.ForkedProcess (the same calls)
        self.kills = 0

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 120.0) -> None:
        if self._forked:
            from cli_fork import fork_process

            self.proc = fork_process(self._command[1:], self._env)
        else:
            self.proc = subprocess.Popen(
                self._command, env=self._env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.base + "/ok", timeout=1).status_code == 200:
                    return
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve on {self.port} exited with {self.proc.returncode}")
            time.sleep(0.05)
        raise TimeoutError(f"serve on {self.port} not answering after {timeout} s")

    def kill(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.kills += 1

    def stop(self) -> None:
        if self.alive and self.proc is not None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@contextlib.contextmanager
def fleet(
    artifactflow: str, config: Path, data: Path, env: dict[str, str], count: int
) -> Iterator[list[Serve]]:
    """`count` servers on the same data (SQLite files, or the database in `env`)."""
    command = [artifactflow, "--config-dir", str(config), "--data-dir", str(data)]
    servers = [Serve(command, env) for _ in range(count)]
    try:
        for server in servers:
            server.start()
        yield servers
    finally:
        for server in servers:
            server.stop()


@dataclass
class Seen:
    """What one SSE client saw: the run id, our event ids and types (`custom` frames), the
    last frame id (for `Last-Event-ID`), and frame ids delivered twice across reconnects."""

    run_id: str | None = None
    events: list[tuple[int, str]] = field(default_factory=list)
    last_id: str | None = None
    frame_ids: set[str] = field(default_factory=set)
    repeated: int = 0

    def take(self, name: str, data: Any, frame_id: str | None) -> None:
        if frame_id:
            if frame_id in self.frame_ids and name != "metadata":
                self.repeated += 1
            self.frame_ids.add(frame_id)
            self.last_id = frame_id
        if name == "metadata" and isinstance(data, dict):
            self.run_id = self.run_id or data.get("run_id")
        if name == "custom" and isinstance(data, dict) and data.get("type") != "llm_chunk":
            self.events.append((int(data["event_id"]), str(data["type"])))

    def problems(self, expected: list[int]) -> list[str]:
        """Stored event ids of the run (`expected`, its `metadata` aside: that one is the
        `metadata` frame) the client never got, and a missing final event."""
        got = {i for i, _ in self.events}
        out = []
        missing = [i for i in expected if i not in got]
        if missing:
            out.append(f"client missed event ids {missing[:6]} of {expected[0]}..{expected[-1]}")
        if not self.events or max(self.events)[1] not in FINAL_EVENTS:
            out.append(f"no final event (last {max(self.events) if self.events else None})")
        if self.repeated:
            out.append(f"{self.repeated} frames delivered twice")
        return out


async def read_sse(response: httpx.Response, seen: Seen) -> AsyncIterator[tuple[str, Any]]:
    """Each frame of `response` as (event, data), recorded in `seen` first."""
    name: str | None = None
    data: list[str] = []
    frame_id: str | None = None
    async for line in response.aiter_lines():
        if line == "":
            if name is not None:
                payload = json.loads("\n".join(data)) if data else None
                seen.take(name, payload, frame_id)
                yield name, payload
            name, data, frame_id = None, [], None
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif line.startswith("id:"):
            frame_id = line[3:].strip()
