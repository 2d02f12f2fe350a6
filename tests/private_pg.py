"""A private PostgreSQL server for fault tests: started by the test, stopped, restarted, killed.

The shared server on 127.0.0.1:5432 (tests/pg.py) must never be restarted under other tests,
so the database-outage tests start their own: `initdb` into a fresh folder, `pg_ctl start` on
a free port of 127.0.0.1 (no Unix socket), trust authentication for `postgres`. `initdb`
refuses to run as root, so as root every server command runs as the `postgres` system user
(`runuser`), which owns the folder.

The binaries come from `/usr/lib/postgresql/<version>/bin` (newest first) or `PATH`; a machine
without them fails the test under `CI` and skips it otherwise, as tests/pg.py does.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from waiting import ceiling


def _bin_dir() -> Path | None:
    for folder in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(folder) / "initdb").exists():
            return Path(folder)
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivatePostgres:
    """One PostgreSQL server in its own folder; `url` reaches its `postgres` database."""

    def __init__(self, bin_dir: Path, root: Path) -> None:
        self.bin = bin_dir
        self.root = root
        self.data = root / "pgdata"
        self.log = root / "server.log"
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._user = "postgres" if os.geteuid() == 0 else None

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / args[0]), *args[1:]]
        if self._user is not None:
            command = ["runuser", "-u", self._user, "--", *command]
        # Output goes to a file: a server started by pg_ctl inherits its descriptors, and a pipe
        # would stay open as long as the server runs.
        with tempfile.TemporaryFile("w+") as out:
            result = subprocess.run(
                command, stdout=out, stderr=subprocess.STDOUT, text=True, timeout=ceiling(300)
            )
            out.seek(0)
            output = out.read()
        if check and result.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{args[0]} failed ({result.returncode}): {output}\n{log}")
        return result

    def init(self) -> None:
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "-E",
            "UTF8",
            "--no-sync",
        )

    def _options(self) -> list[str]:
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} "
            "-c unix_socket_directories='' -c fsync=off -c max_connections=60"
        )
        return ["-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "-t", "60"]

    def start(self) -> None:
        self._run("pg_ctl", *self._options(), "start")

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop", check=False)

    def restart(self, mode: str = "fast") -> None:
        self._run("pg_ctl", *self._options(), "-m", mode, "restart")

    def running(self) -> bool:
        return self._run("pg_ctl", "-D", str(self.data), "status", check=False).returncode == 0


@contextmanager
def private_postgres() -> Iterator[PrivatePostgres]:
    """A started private server, stopped (immediately) and deleted afterwards."""
    bin_dir = _bin_dir()
    if bin_dir is None:
        reason = "initdb/pg_ctl not found (install the PostgreSQL server package)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    root = Path(tempfile.mkdtemp(prefix="af-private-pg-"))
    server = PrivatePostgres(bin_dir, root)
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)


@asynccontextmanager
async def served_on_private_postgres(make_client: Any, monkeypatch: Any) -> AsyncIterator[tuple[str, PrivatePostgres]]:
    """The HTTP app of a client on a private PostgreSQL (a pool of 4), served on a local port:
    (its URL, the server to stop and start)."""
    from browser_helpers import serving

    from artifactflow.api.app import create_app

    with private_postgres() as pg:
        monkeypatch.setenv("ARTIFACTFLOW_DATABASE_URL", pg.url)
        monkeypatch.setenv("ARTIFACTFLOW_DATABASE_POOL_SIZE", "4")
        client = await make_client()
        async with serving(create_app(client=client)) as url:
            yield url, pg
