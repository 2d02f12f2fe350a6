"""Ending what a test run left running (issue 38: a failed CLI test left an `artifactflow run`
alive for 82 minutes).

At the start of the session a marker goes into this process's environment, so every process a
test starts (and what those start) inherits it, even one whose parent died and that was
handed to init. At the end, the processes that carry this session's marker, plus this
process's own descendants, are sent SIGTERM, then SIGKILL after a grace period. Only this
run's processes are ever touched: the marker is unique to it. Linux `/proc` only; elsewhere
it does nothing.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from pathlib import Path

MARKER = "AF_TEST_SESSION"
PROC = Path("/proc")


def mark() -> str:
    """Put this session's marker into the environment children inherit."""
    token = os.environ.setdefault(MARKER, uuid.uuid4().hex)
    return token


def _parent(pid: int) -> int | None:
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return int(stat.rpartition(")")[2].split()[1])  # the field after the state letter


def _carries(pid: int, token: str) -> bool:
    try:
        environ = (PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return False
    return f"{MARKER}={token}".encode() in environ.split(b"\0")


def leftovers(token: str, *, descendants: bool = True) -> list[int]:
    """This run's processes still alive, but for this one: its descendants (unless told not
    to) and any carrying the marker."""
    me = os.getpid()
    pids = [int(p.name) for p in PROC.iterdir() if p.name.isdigit()] if PROC.is_dir() else []
    parents = {pid: _parent(pid) for pid in pids}
    ours: set[int] = set()
    for pid in pids if descendants else ():
        node: int | None = pid
        seen = 0
        while node and seen < 64:  # a descendant of this process
            if parents.get(node) == me:
                ours.add(pid)
                break
            node, seen = parents.get(node), seen + 1
    ours |= {pid for pid in pids if pid != me and _carries(pid, token)}
    ours.discard(me)
    return sorted(ours)


def reap(token: str, grace: float = 5.0, *, descendants: bool = True) -> list[int]:
    """SIGTERM this run's leftover processes, SIGKILL those alive after `grace` seconds;
    returns the ids that were found."""
    found = leftovers(token, descendants=descendants)
    for pid in found:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(_alive(pid) for pid in found):
        time.sleep(0.1)
    for pid in found:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    for pid in found:  # our own children: collect their exit status (no zombies)
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)
    return found


def _alive(pid: int) -> bool:
    try:
        state = (PROC / str(pid) / "stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"
