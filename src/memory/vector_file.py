"""A namespace's cached vectors on disk, so a new process's first search does not read them
all from the database (50,000 × 384 floats: most of a first search's time, docs/memory.md).

One pair of files per (database, namespace, embedder) in the vector folder (`vector_dir`):
`<key>.<token>.npy`, the matrix, opened memory-mapped (`np.load(mmap_mode="r")`: no copy, the
pages come from the OS cache as the first cosine reads them), and `<key>.npz`, what the rows
are (seqs, has-vector flags, update times) and the state of the namespace they were read at:
its version (`af_memory_namespaces`), its row count, and the ids of a few sample rows.

The file is a hint, never the truth. `cache.py` uses it only after checking it against the
database: the namespace's current version must be the file's or later with the change log
reaching back to it (then only the changed rows are read, as for a cache in memory); the
sample rows the log did not touch must still hold the same ids (a database recreated at the
same path, or restored from a backup, has other ids); and after catching up, the row count
must equal the database's. Anything else, or any problem reading the files, and the namespace
is read from the database as before, and the files written again. Files are written whole
under temporary names and renamed into place (the matrix first, under a fresh token, then the
index naming it), so a reader sees an old pair or a new pair, never a mix; a process still
mapping an older matrix keeps it (POSIX keeps an unlinked file for its readers).
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
from sqlalchemy.ext.asyncio import AsyncEngine

from ..core.store.unit_of_work import is_read_only

log = logging.getLogger("artifactflow.memory")

VECTOR_DIR = "memory-vectors"  # in the data folder
MIN_ROWS = 2_000  # smaller namespaces are read from the database in a few milliseconds
SAMPLES = 8  # rows whose ids identify the namespace's lineage


@dataclass(frozen=True)
class Snapshot:
    """A namespace's rows as a file holds them."""

    version: int
    seqs: np.ndarray  # (n,) int64
    matrix: np.ndarray  # (n, dims) float32, memory-mapped read-only
    has_vector: np.ndarray  # (n,) bool
    updated_at: np.ndarray  # (n,) float64
    stale: int
    sample_seqs: np.ndarray  # (k,) int64
    sample_ids: list[str]


class VectorFiles:
    """The vector folder of one database."""

    def __init__(self, folder: Path, database: str, *, min_rows: int = MIN_ROWS) -> None:
        self.folder = folder
        self.database = database  # the engine's URL without password: which database
        self.min_rows = min_rows

    def _key(self, namespace: str, embedder: str, dims: int) -> str:
        ident = "\x00".join((self.database, namespace, embedder, str(dims)))
        return hashlib.sha256(ident.encode()).hexdigest()[:40]

    def load(self, namespace: str, embedder: str, dims: int) -> Snapshot | None:
        key = self._key(namespace, embedder, dims)
        try:
            with np.load(self.folder / f"{key}.npz", allow_pickle=False) as meta:
                header = meta["header"].tolist()
                if header[:3] != [namespace, embedder, str(dims)]:
                    return None
                matrix = np.load(self.folder / f"{key}.{header[3]}.npy", mmap_mode="r", allow_pickle=False)
                snapshot = Snapshot(
                    version=int(meta["numbers"][0]), stale=int(meta["numbers"][1]), seqs=meta["seqs"],
                    matrix=matrix, has_vector=meta["has_vector"], updated_at=meta["updated_at"],
                    sample_seqs=meta["sample_seqs"], sample_ids=[str(i) for i in meta["sample_ids"]],
                )
        except (OSError, KeyError, ValueError, IndexError):
            return None
        n = snapshot.seqs.shape[0]
        if matrix.shape != (n, dims) or matrix.dtype != np.float32 or snapshot.has_vector.shape != (n,):
            return None
        return snapshot

    def save(self, namespace: str, embedder: str, dims: int, snapshot: Snapshot) -> None:
        """Write `snapshot` (best effort: a folder we cannot write only costs speed)."""
        if snapshot.seqs.shape[0] < self.min_rows:
            return
        key = self._key(namespace, embedder, dims)
        token = secrets.token_hex(6)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            matrix_path = self.folder / f"{key}.{token}.npy"
            _write(matrix_path, lambda f: np.save(f, np.ascontiguousarray(snapshot.matrix), allow_pickle=False))
            _write(self.folder / f"{key}.npz", lambda f: np.savez(
                f, header=np.array([namespace, embedder, str(dims), token]),
                numbers=np.array([snapshot.version, snapshot.stale], dtype=np.int64),
                seqs=snapshot.seqs, has_vector=snapshot.has_vector, updated_at=snapshot.updated_at,
                sample_seqs=snapshot.sample_seqs, sample_ids=np.array(snapshot.sample_ids, dtype=str),
            ))
            for old in self.folder.glob(f"{key}.*.npy"):
                if old != matrix_path:
                    old.unlink(missing_ok=True)
        except OSError as exc:
            log.debug("memory vectors not written to %s: %s", self.folder, exc)


    def forget(self, namespace: str, embedder: str, dims: int) -> None:
        """Remove the files of a namespace that no longer exists (deleted with its conversation)."""
        key = self._key(namespace, embedder, dims)
        for path in [self.folder / f"{key}.npz", *self.folder.glob(f"{key}.*.npy")]:
            try:
                path.unlink(missing_ok=True)
            except OSError:
                pass


def _write(path: Path, fill: Callable[[BinaryIO], object]) -> None:
    temporary = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    try:
        with open(temporary, "wb") as f:
            fill(f)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)


def samples(seqs: np.ndarray) -> np.ndarray:
    """Up to `SAMPLES` seqs spread over `seqs` (first and last included)."""
    if seqs.shape[0] == 0:
        return seqs[:0]
    picks = np.unique(np.linspace(0, seqs.shape[0] - 1, min(SAMPLES, seqs.shape[0])).astype(np.int64))
    return np.sort(seqs)[picks]


def vector_files(engine: AsyncEngine, folder: Path | None) -> VectorFiles | None:
    """The vector folder of `engine`'s database: `folder` if given, else `memory-vectors`
    beside a SQLite file (none for a read-only one, nor for PostgreSQL without a folder)."""
    url = engine.url
    if folder is None and url.get_backend_name() == "sqlite" and url.database and not is_read_only(engine):
        folder = Path(url.database).resolve().parent / VECTOR_DIR
    return VectorFiles(folder, url.render_as_string(hide_password=True)) if folder is not None else None
