"""Long-term memory: LangGraph `BaseStore` items in the app store, searched in-process.

`MemoryStore` (store.py) is the one object: the `BaseStore` graph nodes reach with
`get_store()`, and the memory verbs (`add_memory`, `search_memories`, `list_memories`,
`forget`, `reindex`) the tools (tools.py), the CLI and the HTTP routes use. Rows and
namespace versions are in records.py, the per-process vector cache in cache.py, BM25 in
lexical.py, scoring in search.py, embedders in embedders.py. Design and weights:
docs/memory.md.

This package sits beside workflows and replay: above the engine (it uses the app store's
engine and tables), below the facade.
"""

from .records import call_key
from .search import MemoryHit, MemorySearchResult
from .store import LOCAL_USER, MemoryStore, SavedMemory, scope_namespace

__all__ = [
    "LOCAL_USER",
    "MemoryHit",
    "MemorySearchResult",
    "MemoryStore",
    "SavedMemory",
    "call_key",
    "scope_namespace",
]
