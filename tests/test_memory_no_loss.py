"""Never lose a memory: thousands of distinct texts through the public save paths, among them
near-pairs of the standard library's own docs (`time.strftime` / `time.strptime`, `re.sub` /
`re.subn`, `os.remove` / `os.unlink`), plus variants Hypothesis makes of them (a word changed,
a word dropped, text added). Afterwards every text added is either a memory's text or, when a
longer text that contains it replaced it, in that memory's history; and searching for it finds
it. On SQLite with the static embedder (fast enough for thousands of saves in a test).

Every text that de-duplication could merge goes through the single save
(`MemoryStore.add_memory`, what the CLI, HTTP and the `memory_save` tool call), one at a time,
against everything stored before it: each passage with another passage near it (cosine within
0.05 of `memory.dedupe_threshold`: 846 of the 2,287, the named near-pairs among them) and every
variant. A passage with nothing that near cannot be merged (a merge needs a stored vector at or
above the threshold), so the others go in first through the batch import (`add_many`, also
public), which cost each save 8 ms of CPU less (issue 37: the test took 27 CPU seconds, all
in 2,600 single saves)."""

from __future__ import annotations

import asyncio
import inspect
import random
import re
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from artifactflow.core.store.repository import AppStore
from artifactflow.memory import MemoryStore
from artifactflow.memory.dedupe import normalised
from artifactflow.settings.memory import MemorySettings

T = TypeVar("T")
MODULES = ["os", "os.path", "re", "time", "string", "itertools", "collections", "shutil", "json", "math",
           "heapq", "bisect", "functools", "statistics", "textwrap", "datetime", "logging", "random",
           "subprocess", "pathlib", "urllib.parse", "hashlib", "zipfile", "tarfile", "threading", "socket",
           "decimal", "fractions", "typing", "inspect", "argparse", "csv", "sqlite3", "html", "difflib",
           "struct", "copy", "pprint", "enum", "dataclasses", "contextlib", "io", "sys", "operator",
           "calendar", "gzip", "tempfile", "glob"]


def stdlib_passages() -> list[str]:
    import importlib

    out: dict[str, None] = {}
    for name in MODULES:
        module = importlib.import_module(name)
        for attr in sorted(dir(module)):
            obj = getattr(module, attr, None)
            if attr.startswith("_") or not callable(obj):
                continue
            members = [(f"{name}.{attr}", obj)]
            if inspect.isclass(obj):
                members += [(f"{name}.{attr}.{m}", getattr(obj, m, None)) for m in sorted(vars(obj)) if not m.startswith("_")]
            for label, member in members:
                doc = inspect.getdoc(member) if callable(member) else None
                if doc:
                    text = f"{label}: " + " ".join(re.split(r"\n\s*\n", doc)[0].split())
                    out[text[:600]] = None
    return list(out)


PASSAGES = stdlib_passages()


def variant(text: str, how: int, rng: random.Random) -> str:
    words = text.split()
    i = rng.randrange(len(words))
    if how == 0:  # one word changed
        words[i] = words[i] + "x"
    elif how == 1 and len(words) > 3:  # one word dropped
        del words[i]
    else:  # text added: contains the original (a legitimate merge, the original kept in history)
        words.append("(see also the module documentation)")
    return " ".join(words)


NAMED_PAIRS = (("time.strftime:", "time.strptime:"), ("re.sub:", "re.subn:"), ("os.remove:", "os.unlink:"))


async def mergeable(memory: MemoryStore, texts: list[str]) -> list[bool]:
    """Whether each text has another within 0.05 of the de-duplication threshold (by the
    store's own embedder): the texts a save could merge with another, with a margin."""
    assert memory.embedder is not None
    rows = np.asarray(await memory.embedder.embed(texts), dtype=np.float32)
    cosine = rows @ rows.T
    np.fill_diagonal(cosine, -1.0)
    near = cosine.max(axis=1) >= memory.settings.dedupe_threshold - 0.05
    return [bool(n) or t.startswith(tuple(p for pair in NAMED_PAIRS for p in pair)) for t, n in zip(texts, near, strict=True)]


async def test_thousands_of_texts_none_lost(tmp_path: Path) -> None:
    store = await AppStore.open(None, sqlite_path=tmp_path / "app.db")
    memory = MemoryStore(store, MemorySettings(embedder="static"))
    loop = asyncio.get_running_loop()
    ns = ("alice", "global")
    added: list[str] = []

    def run(coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=600)

    near = await mergeable(memory, PASSAGES)
    apart = [text for text, n in zip(PASSAGES, near, strict=True) if not n]
    assert len(apart) < len(PASSAGES) - 600  # hundreds of passages through the single save
    await memory.add_many(ns, apart)
    added += apart
    for text in [text for text, n in zip(PASSAGES, near, strict=True) if n]:
        run_saved = await memory.add_memory(ns, text)
        assert run_saved.namespace == ns
        added.append(text)

    @settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.lists(st.tuples(st.integers(0, len(PASSAGES) - 1), st.integers(0, 2), st.integers(0, 10**6)),
                    min_size=20, max_size=60))
    def more(draws: list[tuple[int, int, int]]) -> None:
        for index, how, seed in draws:
            text = variant(PASSAGES[index], how, random.Random(seed))
            run(memory.add_memory(ns, text))
            added.append(text)

    await asyncio.to_thread(more)
    assert len(PASSAGES) >= 2000 and len(added) >= len(PASSAGES) + 160

    hits = await memory.list_memories([ns], limit=100_000)
    kept = {normalised(hit.text) for hit in hits}
    replaced = {normalised(t) for t in added} - kept
    # a replaced text is in the history of the memory that replaced it, whose text contains
    # it (a merge needs that; a longer text merged later contains it too): only those are read
    for hit in [h for h in hits if any(r in normalised(h.text) for r in replaced)]:
        history = await memory.history("alice", hit.id)
        assert history is not None
        kept.update(normalised(h["text"]) for h in history)
    lost = [t for t in added if normalised(t) not in kept]
    assert lost == [], f"{len(lost)} lost, e.g. {lost[:3]}"
    for pair in NAMED_PAIRS:
        texts = [t for t in PASSAGES if any(t.startswith(p) for p in pair)]
        assert len(texts) == 2 and all(normalised(t) in kept for t in texts), pair
    rng = random.Random(33)
    for text in rng.sample(PASSAGES, 150):  # and the public search finds them
        found = await memory.search_memories([("alice",)], text, mode="hybrid", limit=10)
        assert any(text in h.text for h in found.hits), text
    await store.close()
