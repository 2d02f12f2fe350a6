"""One BLAS thread for memory's numpy work, without changing the rest of the process.

OpenBLAS spreads even a small matmul over every core, and its threads then spin waiting for
the next one: on a busy two-core machine a query's embedding took 670 ms of wall time instead
of 40, and the suite's memory tests burned ~10 CPU seconds in idle BLAS threads. The embedder's
matmuls (minilm.py) and the cosine over a namespace's vectors (cache.py, a matrix-vector
product that one thread does in a few ms at 50,000 rows) run under `one_thread()`.
threadpoolctl's controller is made once: `threadpool_limits` scans the loaded libraries on
every call (1.5 ms, a tenth of a query's embedding).
"""

from __future__ import annotations

import threading
from contextlib import AbstractContextManager
from typing import Any

_CONTROLLER: list[Any] = []
_LOCK = threading.Lock()


def one_thread() -> AbstractContextManager[Any]:
    """A context in which BLAS uses one thread (the previous limit is restored after)."""
    if not _CONTROLLER:
        with _LOCK:
            if not _CONTROLLER:
                from threadpoolctl import ThreadpoolController

                _CONTROLLER.append(ThreadpoolController())
    return _CONTROLLER[0].limit(limits=1, user_api="blas")
