"""What the adapters (the API, the CLI) need to tell a database that is away from a bug, without
reaching into the store: `store_fault(exc)` is the `StoreUnavailableError` an exception stands
for, or None (see `core/store/faults.py`)."""

from __future__ import annotations

from ..core.store.faults import store_fault

__all__ = ["store_fault"]
