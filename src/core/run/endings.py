"""A run's ending that the database would not take: space kept for it, and a durable marker.

A run's last act is one write (`Segment._finish`). When the disk is full that write fails like
every other, and a command line that then exits used to leave its message `running` for good.
Two things make sure the ending is stored:

1. **Spare space.** Every process on a SQLite store keeps a small file next to the database
   (`SPARE_NAME`, `SPARE_BYTES`, allocated when it opens the store). A run whose final write
   fails because the disk is full deletes it, and the write is tried again at once: the space
   it frees is enough for a final status and its event, so the run ends `failed`, with the
   reason, in the process that ran it. The next process that opens the store with space to
   spare makes the file again.
2. **A durable marker.** When the ending still cannot be stored as the process stops (the
   disk stays full, PostgreSQL is away), the process leaves a small JSON file in the data
   folder (`endings/<message id>.<run token>.<reason>`, an empty file: creating it needs no
   free block). Whichever process opens
   the store next — or the server's maintenance loop (`workers.py`), every few seconds —
   stores the ending (`failed`, the reason, a final `error` event) with the usual
   compare-and-set on that token, and removes the marker. A marker whose run no longer holds
   its message (recovered, cancelled, ended meanwhile) is dropped.

Nothing here runs on a run's normal path: only after its final write failed, when a store
opens, and in the maintenance loop (a directory listing).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from pathlib import Path
from typing import Any

from ...events.payloads import ErrorData
from ..store.faults import DISK_FULL, READ_ONLY, UNAVAILABLE, watch_free_space
from .eventlog import change_status

log = logging.getLogger("artifactflow")

SPARE_NAME = "artifactflow.spare"
SPARE_BYTES = 512 * 1024
MARKERS = "endings"

_MESSAGES = {
    DISK_FULL: "the disk was full",
    READ_ONLY: "the data folder or database was read-only",
    UNAVAILABLE: "the database could not be reached",
}
_SLUGS = {DISK_FULL: "disk-full", READ_ONLY: "read-only", UNAVAILABLE: "unavailable"}
_REASONS = {**{slug: reason for reason, slug in _SLUGS.items()}, "error": "error"}


class Spare:
    """The spare space and the markers of one data folder (`data_dir`); `sqlite`: the app
    store is a SQLite file in that folder (the only case where spare space helps)."""

    def __init__(self, data_dir: Path, *, sqlite: bool) -> None:
        self.data_dir = data_dir
        self.sqlite = sqlite
        if sqlite:
            watch_free_space(data_dir)  # "disk I/O error" on a nearly full disk: `faults.py`

    @property
    def spare_path(self) -> Path:
        return self.data_dir / SPARE_NAME

    @property
    def markers(self) -> Path:
        return self.data_dir / MARKERS

    def ensure(self) -> None:
        """Keep the spare file (SQLite only); a disk too full for it is left as it is."""
        with contextlib.suppress(OSError):
            self.markers.mkdir(parents=True, exist_ok=True)  # a marker then needs no new block
        if not self.sqlite or self.spare_path.exists():
            return
        try:
            fd = os.open(self.spare_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except OSError:
            return
        try:
            os.posix_fallocate(fd, 0, SPARE_BYTES)  # real blocks, not a sparse file
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(self.spare_path)
            return
        os.close(fd)

    def release(self) -> bool:
        """Free the spare space for a final write; False if there was none to free."""
        if not self.sqlite:
            return False
        try:
            os.unlink(self.spare_path)
        except OSError:
            return False
        log.warning("the disk is full: released %d KB kept for storing runs' endings", SPARE_BYTES // 1024)
        return True

    def mark(self, message_id: str, run_token: str, reason: str) -> bool:
        """Leave the marker of an ending that could not be stored; False if even that failed.
        The marker is an empty file whose name holds everything (`<message>.<token>.<reason>`):
        creating it takes no data block, so it works on a disk with no byte left."""
        slug = _SLUGS.get(reason, "error")
        try:
            self.markers.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.markers / f"{message_id}.{run_token}.{slug}", os.O_WRONLY | os.O_CREAT, 0o600)
            os.close(fd)
            dir_fd = os.open(self.markers, os.O_RDONLY)
            try:
                os.fsync(dir_fd)  # the name is the content: make the entry durable
            finally:
                os.close(dir_fd)
        except OSError as exc:
            log.error("run %s: could not leave a marker of its ending either (%s)", message_id, exc)
            return False
        log.warning(
            "run %s: its ending (%s) is stored by the next process that opens this database",
            message_id, reason,
        )
        return True

    def pending(self) -> list[tuple[str, str, str]]:
        """The markers left: (message id, run token, reason)."""
        try:
            names = sorted(p.name for p in self.markers.iterdir())
        except OSError:
            return []
        found = []
        for name in names:
            parts = name.split(".")
            if len(parts) == 3 and parts[2] in _REASONS:
                found.append((parts[0], parts[1], _REASONS[parts[2]]))
        return found

    def drop(self, message_id: str, run_token: str, reason: str) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.markers / f"{message_id}.{run_token}.{_SLUGS.get(reason, 'error')}")


async def settle_endings(store: Any, spare: Spare) -> list[str]:
    """Store the endings the markers hold; returns the message ids ended here. A store that
    still refuses the write keeps the markers for the next attempt."""
    ended: list[str] = []
    for message_id, token, reason in spare.pending():
        message = await store.get_message(message_id)
        if message is None or message["status"] != "running" or message["run_token"] != token:
            spare.drop(message_id, token, reason)  # ended, recovered or cancelled meanwhile
            continue
        text = (
            f"{reason}: {_MESSAGES.get(reason, 'the run could not store its end')}; its process "
            "stopped before the database accepted writes again"
        )
        data = ErrorData(message=text, kind="storage" if reason in _MESSAGES else "error")
        event = await change_status(
            store, message, data, expected_status="running", expected_run_token=token,
            status="failed", error=text, lease_expires_at=None,
        )
        spare.drop(message_id, token, reason)
        if event is not None:
            log.warning("run %s: stored the ending its stopped process left: failed (%s)", message_id, reason)
            ended.append(message_id)
    return ended


async def settle_on_open(rt: Any) -> None:
    """When a store opens: store the endings stopped processes left, then keep the spare
    space (after, so a disk with little room goes to the endings first). Never fails the open."""
    spare = rt.spare
    if spare is None:
        return
    try:
        await settle_endings(rt.store, spare)
    except Exception as exc:  # the store is still away: the next open or maintenance pass
        log.warning("could not store the endings left by stopped processes yet (%s)", exc)
    spare.ensure()


async def keep_settling(rt: Any, period: float) -> None:
    """The maintenance loop's part: store marked endings every `period` seconds."""
    while True:
        await asyncio.sleep(period)
        await settle_on_open(rt)
