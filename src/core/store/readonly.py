"""Opening SQLite files in a data folder we may not write: reading commands still work.

A data folder can be read-only (a mounted backup, a folder owned by another user, a
container's read-only layer). Opening it as usual fails every command, listing included,
with "unable to open database file": SQLite in WAL mode must create its `-wal` and `-shm`
files next to the database, and the schema migration writes. So a file that exists in a
folder (or is itself) not writable is opened with SQLite's URI parameters `mode=ro` and
`immutable=1` (no locks, no WAL files: nothing is written and nothing can change under us
here), without the pragmas that set up a file and without migration. Writes then fail with
"attempt to write a readonly database", which `faults.store_fault` names "read-only".

Whether a folder is writable is probed by creating a temporary file in it: `os.access`
answers yes for root whatever the permissions, and says nothing about a read-only mount.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from urllib.parse import quote


def writable(path: Path) -> bool:
    """Whether SQLite could write the database at `path` (and its WAL files beside it)."""
    try:
        with tempfile.TemporaryFile(dir=path.parent):
            pass
        if path.exists():
            with path.open("r+b"):
                pass
    except OSError:
        return False
    return True


def read_only_uri(path: Path) -> str:
    """A `file:` URI opening `path` for reading only, with no locks and no WAL files."""
    return f"file:{quote(str(path.resolve()))}?mode=ro&immutable=1"


def read_only_target(path: Path) -> tuple[str, bool]:
    """What to open for reading `path`: its read-only URI when it exists, else an empty
    in-memory database; and whether it exists."""
    exists = path.exists()
    return (read_only_uri(path) if exists else ":memory:"), exists
