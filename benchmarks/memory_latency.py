"""The latency half of benchmarks/memory_retrieval.py (`--latency N,...`): see its docstring.

Per backend and n: import n items with `MemoryStore.add_many` (vectors given, so the rate is
the store's); reopen the store in a new `MemoryStore` (an empty vector cache) and time its
first search, which reads the vectors from the database and writes the namespace's vector
file (src/memory/vector_file.py; from 2,000 items); reopen again, as after a restart, and time
the first search (vectors from the memory-mapped file, checked against the database). Before
that first search the benchmark moves its objects out of the collector's reach, as a server
process does when its engine opens (`gc.freeze`, `core.engine.freeze_startup_objects`; here
before each backend's restart, since the earlier backends' objects are alive too): without
it the first search pays this process's first full collection (~140 ms over the benchmark's
own corpus, vectors and baselines), which a server does not. The model is loaded before (its
load is printed apart). Then `--repeats` rounds of every question in hybrid mode,
interleaved per question with LangGraph's `InMemoryStore` (same items, same vectors, MiniLM
for the query) and rank_bm25 over the same texts. Queries are embedded live with MiniLM.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from memory_retrieval import USER, CachedEmbedder, opened, reopen, words

from artifactflow.memory import MemoryStore
from artifactflow.memory.embedders import make_embedder
from artifactflow.memory.vector_file import MIN_ROWS
from artifactflow.settings.memory import MemorySettings


def items(corpus: dict[str, str], vectors: CachedEmbedder, n: int) -> tuple[list[str], dict[str, np.ndarray]]:
    """n texts: the passages, then tagged copies whose vectors are the passage's plus noise."""
    names = list(corpus)
    rng = np.random.default_rng(7)
    texts, given = [], {}
    for i in range(n):
        base = corpus[names[i % len(names)]]
        text = base if i < len(names) else f"{base} [variant {i // len(names)}]"
        vector = vectors.known[vectors.key(base)]
        if i >= len(names):
            vector = vector + rng.normal(0, 0.02, vector.shape).astype(np.float32)
            vector /= np.linalg.norm(vector)
        texts.append(text)
        given[text] = vector.astype(np.float32)
    return texts, given


async def baseline_store(kind: Any, texts: list[str], given: dict[str, np.ndarray], minilm: CachedEmbedder) -> Any:
    """LangGraph's `InMemoryStore` holding `texts` with the same vectors; queries by MiniLM."""

    def embed(batch: list[str]) -> list[list[float]]:
        return [given[t].tolist() if t in given else minilm.inner.model.embed([t])[0].tolist() for t in batch]

    store = kind(index={"dims": 384, "embed": embed, "fields": ["text"]})
    await asyncio.to_thread(lambda: [store.put(("bench",), str(i), {"text": t}) for i, t in enumerate(texts)])
    return store


async def timed_first(memory: MemoryStore, query: str, n: int, read: str) -> float:
    """The first search of a new process's store, in ms; asserts how the vectors were read."""
    started = time.perf_counter()
    first = await memory.search_memories([("bench",)], query, mode="hybrid", limit=10)
    elapsed = (time.perf_counter() - started) * 1000
    assert first.mode == "hybrid" and first.hits
    assert sum(e.alive for e in memory.cache.entries.values()) == n and memory.cache.reads[read] == 1, memory.cache.reads
    return elapsed


async def first_search(backend: str, where: str, settings: MemorySettings, embedder: Any, vectors: Path,
                       query: str, n: int, read: str) -> tuple[float, MemoryStore]:
    """A new process's first search with no vector file yet (read from the database, the file
    written); waits for the file."""
    store = await reopen(backend, where)
    try:
        memory = MemoryStore(store, settings, embedder=embedder, vector_dir=vectors)
        elapsed = await timed_first(memory, query, n, read)
        memory.cache.wait_for_files()
    finally:
        await store.close()
    return elapsed, memory


def pct(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))]


async def latency(args: argparse.Namespace, corpus: dict[str, str], questions: list[dict[str, Any]], sizes: list[int]) -> None:
    from langgraph.store.memory import InMemoryStore
    from rank_bm25 import BM25Okapi

    minilm = CachedEmbedder(make_embedder(MemorySettings(embedder="minilm")))
    await minilm.embed(list(corpus.values()))
    load_started = time.perf_counter()
    fresh_model = make_embedder(MemorySettings(embedder="minilm"))
    fresh_model.model.weights = None  # type: ignore[union-attr]  # time a cold load of the model
    fresh_model.model.load()  # type: ignore[union-attr]
    model_load = time.perf_counter() - load_started
    sample = list(corpus.values())[:256]
    started = time.perf_counter()
    await fresh_model.embed(sample)
    embed_rate = len(sample) / (time.perf_counter() - started)
    print(f"\nMiniLM: model load {model_load * 1000:.0f} ms; indexing {embed_rate:.0f} passages/s (batched, this machine)")
    query_ms = []
    for q in questions[:40]:
        started = time.perf_counter()
        await fresh_model.embed([q["question"]])
        query_ms.append((time.perf_counter() - started) * 1000)
    print(f"MiniLM query embedding: median {statistics.median(query_ms):.1f} ms, p95 {pct(query_ms, 0.95):.1f} ms (wall, in a thread)")
    texts_q = [q["question"] for q in questions]
    print("\nbackend  n | import items/s | first search ms: no file / after a restart | ours median / p95 ms | InMemoryStore median / p95 | rank_bm25 median / p95")
    with tempfile.TemporaryDirectory() as folder:
        for n in sizes:
            texts, given = items(corpus, minilm, n)
            minilm.extra = given
            lg = await baseline_store(InMemoryStore, texts, given, minilm)
            bm25 = BM25Okapi([words(t) for t in texts])
            for backend in args.backends:
                async with opened(backend, Path(folder)) as (store, where):
                    settings = MemorySettings(embedder="minilm")
                    memory = MemoryStore(store, settings, embedder=minilm)
                    started = time.perf_counter()
                    ids = await memory.add_many(USER, texts)
                    rate = len(ids) / (time.perf_counter() - started)
                    assert len(ids) == n
                    vectors = Path(folder) / f"vectors-{backend}-{n}"  # the data folder's memory-vectors
                    minilm.live = True  # queries embedded by the model, as a user's are
                    cold_ms, _ = await first_search(backend, where or "", settings, minilm, vectors, texts_q[0], n, "full")
                    second = await reopen(backend, where or "")  # a restart: the file is there now
                    try:
                        memory = MemoryStore(second, settings, embedder=minilm, vector_dir=vectors)
                        gc.collect()  # as `serve` does once at its engine's opening
                        gc.freeze()
                        first_ms = await timed_first(memory, texts_q[0], n, "file" if n >= MIN_ROWS else "full")
                        ours, theirs, bm = [], [], []
                        for _ in range(args.repeats):
                            for q in texts_q:
                                started = time.perf_counter()
                                found = await memory.search_memories([("bench",)], q, mode="hybrid", limit=10)
                                ours.append((time.perf_counter() - started) * 1000)
                                assert found.mode == "hybrid"
                                started = time.perf_counter()
                                await asyncio.to_thread(lg.search, ("bench",), query=q, limit=10)
                                theirs.append((time.perf_counter() - started) * 1000)
                                started = time.perf_counter()
                                np.argsort(-bm25.get_scores(words(q)))[:10]
                                bm.append((time.perf_counter() - started) * 1000)
                    finally:
                        minilm.live = False
                        await second.close()
                print(f"{backend:8s} {n:6d} | {rate:8.0f} | {cold_ms:6.0f} / {first_ms:6.0f} | {statistics.median(ours):6.1f} / {pct(ours, .95):6.1f}"
                      f" | {statistics.median(theirs):6.1f} / {pct(theirs, .95):6.1f} | {statistics.median(bm):6.1f} / {pct(bm, .95):6.1f}"
                      f"   (ours/InMemoryStore median {statistics.median(ours) / statistics.median(theirs):.2f})", flush=True)
