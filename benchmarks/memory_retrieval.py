"""Retrieval quality and latency of memory search, against rank_bm25 and LangGraph's
`InMemoryStore` (with the same embedder) measured in the same run.

Corpus: passages of the standard library's docstrings (benchmarks/retrieval/corpus.py, ~2,200).
Questions: benchmarks/retrieval/questions.json (keyword / paraphrase / mixed; `tune` and
`heldout` splits; how they were written is in the file). The fusion weights were chosen on
`tune`; the figures that count are `heldout`.

Quality (`--quality`): every passage is added through `MemoryStore.add_many` to one user on
each backend, for each embedder, then each question is searched (hybrid; `lexical` for
`none`, as the answer's mode says) and scored: recall@5, recall@10 (any accepted answer in the
first k), MRR@10. Baselines on the same passages: rank_bm25's BM25Okapi (lower-cased `\\w+`
words) and LangGraph's `InMemoryStore` with MiniLM as its embed function.

Latency (`--latency 1000,10000,50000`): n items in one user's namespace (the passages, then
copies of them with a variant tag, whose MiniLM vectors are the passage's plus small noise:
embedding 50,000 texts with MiniLM on this machine would take over an hour, and search cost
does not depend on the vectors' values); per backend: the first search of a new process's
store (vectors read from the database), then median / p95 of the questions in hybrid mode,
each embedding its query live with MiniLM. The same queries against `InMemoryStore` and
rank_bm25 at the same n, interleaved, give the baseline. Import: items/s of `add_many`
(vectors given; the MiniLM embedding rate is printed apart).

Asserts: every search ran the mode it says, every question's answer is in the corpus, and the
latency runs searched n items.

Run: `python benchmarks/memory_retrieval.py --quality --backends sqlite,pg --embedders minilm,static,none`
     `python benchmarks/memory_retrieval.py --latency 1000,10000,50000 --backends sqlite,pg`
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "retrieval"))
sys.path.insert(0, str(HERE.parent / "tests"))

from corpus import passages  # noqa: E402

from artifactflow.core.store.repository import AppStore  # noqa: E402
from artifactflow.memory import MemoryStore  # noqa: E402
from artifactflow.memory.embedders import make_embedder  # noqa: E402
from artifactflow.settings.memory import MemorySettings, SearchWeights  # noqa: E402

USER = ("bench", "global")
CACHE = Path(tempfile.gettempdir()) / "af_retrieval_vectors"


class CachedEmbedder:
    """An embedder's vectors, kept on disk by text (the benchmark embeds the corpus once per
    embedder); queries named in `live` are always embedded (latency counts them)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.dims = inner, inner.name, inner.dims
        CACHE.mkdir(exist_ok=True)
        self.path = CACHE / (re.sub(r"\W", "_", inner.name) + ".npz")
        self.known: dict[str, np.ndarray] = dict(np.load(self.path)) if self.path.exists() else {}
        self.extra: dict[str, np.ndarray] = {}  # text → vector given (latency copies)
        self.live = False

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha1(text.encode()).hexdigest()

    async def embed(self, texts: list[str]) -> np.ndarray:
        if self.live:
            return await self.inner.embed(texts)
        missing = [t for t in texts if self.key(t) not in self.known and t not in self.extra]
        if missing:
            rows = await self.inner.embed(missing)
            for text, row in zip(missing, rows, strict=True):
                self.known[self.key(text)] = row
            if len(missing) > 50:
                np.savez(self.path, **self.known)
        return np.stack([self.extra[t] if t in self.extra else self.known[self.key(t)] for t in texts])


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def score(ranked: Sequence[str], answers: Sequence[str]) -> tuple[float, float, float]:
    """recall@5, recall@10, reciprocal rank within 10."""
    rank = next((i for i, name in enumerate(ranked[:10], start=1) if name in answers), None)
    return float(rank is not None and rank <= 5), float(rank is not None), 1.0 / rank if rank else 0.0


def table(rows: dict[str, list[tuple[dict[str, Any], tuple[float, float, float]]]], split: str) -> None:
    print(f"\n{split}: system | keyword MRR@10 | paraphrase R@10 | overall R@5 | overall R@10 | overall MRR")
    for system, results in rows.items():
        chosen = [(q, s) for q, s in results if q["split"] == split]

        def mean(kind: str | None, index: int, chosen: list[Any] = chosen) -> float:
            picked = [s[index] for q, s in chosen if kind is None or q["kind"] == kind]
            return statistics.fmean(picked) if picked else float("nan")

        print(f"  {system:34s} {mean('keyword', 2):.3f}  {mean('paraphrase', 1):.3f}  "
              f"{mean(None, 0):.3f}  {mean(None, 1):.3f}  {mean(None, 2):.3f}  (n={len(chosen)})")


@asynccontextmanager
async def opened(backend: str, folder: Path) -> AsyncIterator[tuple[AppStore, str | None]]:
    if backend == "sqlite":
        path = folder / f"bench-{time.monotonic_ns()}.db"
        store = await AppStore.open(None, sqlite_path=path)
        try:
            yield store, str(path)
        finally:
            await store.close()
    else:
        from pg import fresh_database

        async with fresh_database() as url:
            store = await AppStore.open(url)
            try:
                yield store, url
            finally:
                await store.close()


async def reopen(backend: str, where: str) -> AppStore:
    return await AppStore.open(None, sqlite_path=Path(where)) if backend == "sqlite" else await AppStore.open(where)


async def ours(memory: MemoryStore, names: dict[str, str], questions: list[dict[str, Any]], expect: str) -> list[Any]:
    out = []
    for q in questions:
        found = await memory.search_memories([("bench",)], q["question"], mode="hybrid", limit=10)
        assert found.mode == expect, (found.mode, expect)
        out.append((q, score([names[h.id] for h in found.hits], q["answers"])))
    return out


async def quality(args: argparse.Namespace, corpus: dict[str, str], questions: list[dict[str, Any]]) -> None:
    from langgraph.store.memory import InMemoryStore
    from rank_bm25 import BM25Okapi

    names_in_order = list(corpus)
    texts = [corpus[n] for n in names_in_order]
    rows: dict[str, list[Any]] = {}
    bm25 = BM25Okapi([words(t) for t in texts])
    rows["rank_bm25"] = []
    for q in questions:
        top = np.argsort(-bm25.get_scores(words(q["question"])))[:10]
        rows["rank_bm25"].append((q, score([names_in_order[i] for i in top], q["answers"])))
    minilm = CachedEmbedder(make_embedder(MemorySettings(embedder="minilm")))
    await minilm.embed(texts)

    def embed_fn(batch: Sequence[str]) -> list[list[float]]:
        return asyncio.run(minilm.embed(list(batch))).tolist()

    lg = InMemoryStore(index={"dims": 384, "embed": embed_fn, "fields": ["text"]})
    await asyncio.to_thread(lambda: [lg.put(("bench",), n, {"text": corpus[n]}) for n in names_in_order])
    rows["langgraph InMemoryStore (minilm)"] = []
    for q in questions:
        hits = await asyncio.to_thread(lg.search, ("bench",), query=q["question"], limit=10)
        rows["langgraph InMemoryStore (minilm)"].append((q, score([h.key for h in hits], q["answers"])))
    with tempfile.TemporaryDirectory() as folder:
        for backend in args.backends:
            for embedder in args.embedders:
                async with opened(backend, Path(folder)) as (store, _):
                    settings = MemorySettings(embedder=embedder)  # type: ignore[arg-type]
                    inner = make_embedder(settings)
                    memory = MemoryStore(store, settings, embedder=CachedEmbedder(inner) if inner else None)
                    ids = await memory.add_many(USER, texts)
                    names = dict(zip(ids, names_in_order, strict=True))
                    expect = "hybrid" if inner else "lexical"
                    if args.sweep and embedder == "minilm":
                        await sweep(memory, names, [q for q in questions if q["split"] == "tune"], backend)
                    rows[f"ours {backend} {embedder}"] = await ours(memory, names, questions, expect)
    for split in ("tune", "heldout"):
        table(rows, split)


async def sweep(memory: MemoryStore, names: dict[str, str], tune: list[dict[str, Any]], backend: str) -> None:
    """Fusion settings tried on the tune split only (the defaults were chosen from this)."""
    print(f"\nsweep on tune ({backend}): fusion lexical lexical_identifiers rrf_k | kwMRR paraR@10 R@5")
    base = memory.settings
    for fusion in ("rrf", "weighted"):
        grid = [(0.5, 1.0), (0.5, 2.0), (1.0, 2.0), (1.0, 3.0)] if fusion == "rrf" else \
            [(0.0, 0.4), (0.03, 0.4), (0.05, 0.4), (0.05, 0.6), (0.1, 0.1), (0.1, 0.4), (0.2, 0.6)]
        for lexical, ident in grid:
            for k in ((10.0, 30.0) if fusion == "rrf" else (60.0,)):
                weights = SearchWeights(fusion=fusion, lexical=lexical, lexical_identifiers=ident, rrf_k=k,
                                        semantic=1.0 if fusion == "rrf" else 0.85)
                memory.settings = base.model_copy(update={"weights": weights})
                results = await ours(memory, names, tune, "hybrid")
                kw = statistics.fmean(s[2] for q, s in results if q["kind"] == "keyword")
                para = statistics.fmean(s[1] for q, s in results if q["kind"] == "paraphrase")
                r5 = statistics.fmean(s[0] for q, s in results)
                print(f"  {fusion:8s} {lexical:.2f} {ident:.2f} {k:4.0f} | {kw:.3f} {para:.3f} {r5:.3f}")
    memory.settings = base


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quality", action="store_true")
    parser.add_argument("--sweep", action="store_true", help="also print the fusion sweep on the tune split")
    parser.add_argument("--latency", default="", help="comma-separated item counts, e.g. 1000,10000,50000")
    parser.add_argument("--backends", default="sqlite,pg")
    parser.add_argument("--embedders", default="minilm,static,none")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    args.backends = ["postgres" if b in ("pg", "postgres") else b for b in args.backends.split(",") if b]
    args.embedders = [e for e in args.embedders.split(",") if e]
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    corpus = passages()
    data = json.loads((HERE / "retrieval" / "questions.json").read_text())
    questions = data["questions"]
    assert all(any(a in corpus for a in q["answers"]) for q in questions)
    print(f"corpus: {len(corpus)} passages; questions: {len(questions)}")
    if args.quality:
        asyncio.run(quality(args, corpus, questions))
    if args.latency:
        from memory_latency import latency

        asyncio.run(latency(args, corpus, questions, [int(n) for n in args.latency.split(",")]))


if __name__ == "__main__":
    main()
