"""Knowledge bases: documents cut into chunks and kept in the memory index under
`(user, "knowledge", base)`, searched like memories (retrieval-augmented generation).

Reading: Markdown and text as they are; HTML and PDF through the converter `web_fetch` uses
(`tools/web/extract.py`: HTML to Markdown without the page chrome, PDF to text). Chunking
keeps paragraphs whole when they fit `knowledge.chunk_chars`, splits longer ones at sentence
or word boundaries, and starts each chunk with the last `chunk_overlap` characters of the one
before, so a fact cut at a boundary is still whole in one of them.

Identity: a document is its resolved path (an artifact: `artifact:CONVERSATION/ID`); each chunk
is keyed by that path, the SHA-256 of the document's text and its index. Adding a document
again with the same text changes nothing (`unchanged`); with other text its old chunks are
deleted and the new ones written in the same transaction (`replaced`).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import sqlalchemy as sa

from ..errors import UserError
from ..settings.knowledge import KnowledgeSettings
from ..settings.projects import project_name_problem
from . import records
from .records import m, ns_key
from .search import MemorySearchResult

if TYPE_CHECKING:
    from .store import MemoryStore

TEXT_SUFFIXES = (".md", ".markdown", ".txt", ".text", ".rst")
HTML_SUFFIXES = (".html", ".htm", ".xhtml")
PDF_SUFFIXES = (".pdf",)
SUFFIXES = TEXT_SUFFIXES + HTML_SUFFIXES + PDF_SUFFIXES
ARTIFACTS_BASE = "artifacts"
MAX_FILE_BYTES = 50_000_000


def knowledge_namespace(user: str, base: str) -> tuple[str, ...]:
    return (user, "knowledge", check_base(base))


def check_base(base: str) -> str:
    problem = project_name_problem(base)
    if problem:
        raise UserError(problem.replace("project name", "knowledge base name"))
    return base


@dataclass
class Added:
    """What `add` did with one document."""

    path: str
    base: str
    status: str  # added | replaced | unchanged
    chunks: int
    sha256: str
    title: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Document:
    path: str
    base: str
    title: str | None
    chunks: int
    sha256: str
    updated_at: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- reading and chunking ---------------------------------------------------------------------


def read_document(path: Path) -> tuple[str | None, str]:
    """`(title, text)` of a Markdown, text, HTML or PDF file (`UserError` for anything else)."""
    from ..tools.web.extract import FetchError, html_to_markdown, pdf_to_text

    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise UserError(
            f"{path}: cannot read {suffix or 'a file without a suffix'}; knowledge bases take "
            f"{', '.join(SUFFIXES)}"
        )
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise UserError(f"{path}: larger than {MAX_FILE_BYTES // 1_000_000} MB")
    data = path.read_bytes()
    if suffix in PDF_SUFFIXES:
        try:
            title, text, _note = pdf_to_text(data)
        except FetchError as exc:
            raise UserError(f"{path}: {exc}") from None
        return title, text
    text = data.decode("utf-8", errors="replace")
    if suffix in HTML_SUFFIXES:
        return html_to_markdown(text)
    heading = re.search(r"^#\s+(.+)$", text, re.MULTILINE)
    return (heading.group(1).strip() if heading else None), text


_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def _pieces(paragraph: str, size: int) -> list[str]:
    """A paragraph longer than `size` cut at sentence, then word, then character bounds."""
    out: list[str] = []
    current = ""
    for sentence in _SENTENCE.split(paragraph):
        while len(sentence) > size:  # one sentence too long: cut at a space
            cut = sentence.rfind(" ", 0, size)
            cut = cut if cut > size // 2 else size
            if current:
                out.append(current)
                current = ""
            out.append(sentence[:cut].strip())
            sentence = sentence[cut:].strip()
        if current and len(current) + 1 + len(sentence) > size:
            out.append(current)
            current = sentence
        else:
            current = f"{current} {sentence}" if current else sentence
    if current:
        out.append(current)
    return [p for p in out if p]


def chunk_text(text: str, size: int, overlap: int) -> list[str]:
    """Chunks of at most about `size` characters (plus the overlap), paragraphs kept whole
    when they fit."""
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text.replace("\r\n", "\n")) if p.strip()]
    units: list[str] = []
    for paragraph in paragraphs:
        units += [paragraph] if len(paragraph) <= size else _pieces(paragraph, size)
    chunks: list[str] = []
    current = ""
    for unit in units:
        if current and len(current) + 2 + len(unit) > size:
            chunks.append(current)
            tail = current[-overlap:] if overlap else ""
            if tail and " " in tail:
                tail = tail[tail.index(" ") + 1 :]  # start the overlap at a word
            current = f"{tail}\n\n{unit}" if tail else unit
        else:
            current = f"{current}\n\n{unit}" if current else unit
    if current:
        chunks.append(current)
    return chunks


def _read_all(paths: Sequence[str | Path]) -> list[tuple[str, str | None, str]]:
    """`(resolved path, title, text)` of every file (a folder: its readable files, recursively)."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
        else:
            files.append(path)
    if not files:
        raise UserError("no readable files given (knowledge bases take " + ", ".join(SUFFIXES) + ")")
    return [(str(f.resolve()), *read_document(f)) for f in files]


def _resolved(sources: Sequence[str]) -> list[str]:
    return [str(Path(s).expanduser().resolve()) for s in sources if not s.startswith("artifact:")]


# --- the store side ---------------------------------------------------------------------------


def _source_key(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()[:24]


def _chunk_id(namespace: tuple[str, ...], key: str) -> str:
    return hashlib.sha256(f"{ns_key(namespace)}\x00{key}".encode()).hexdigest()[:32]


class KnowledgeBases:
    """`add`, `add_text`, `list`, `remove` and `search` over one `MemoryStore`."""

    def __init__(self, memory: MemoryStore, settings: KnowledgeSettings | None = None) -> None:
        self.memory = memory
        self.settings = settings or KnowledgeSettings()

    async def add(
        self, paths: Sequence[str | Path], *, base: str | None = None, user_id: str | None = None
    ) -> list[Added]:
        """Ingest files (a folder: the readable files in it, recursively)."""
        documents = await asyncio.to_thread(_read_all, paths)
        return [
            await self.add_text(source, text, title=title, base=base, user_id=user_id)
            for source, title, text in documents
        ]

    async def add_text(
        self, source: str, text: str, *, title: str | None = None, base: str | None = None,
        user_id: str | None = None,
    ) -> Added:
        """Index `text` as the document `source` (a path, `artifact:...`), replacing an
        earlier version of it."""
        from .store import LOCAL_USER

        base = base or self.settings.base
        namespace = knowledge_namespace(user_id or LOCAL_USER, base)
        digest = hashlib.sha256(text.encode()).hexdigest()
        prefix = _source_key(source) + ":"
        pieces = chunk_text(text, self.settings.chunk_chars, self.settings.chunk_overlap)
        async with self.memory.engine.connect() as conn:
            old = (await conn.execute(
                sa.select(m.c.seq, m.c.key).where(m.c.namespace == ns_key(namespace), m.c.key.startswith(prefix))
            )).all()
        if old and all(row.key.startswith(f"{prefix}{digest[:16]}:") for row in old) and len(old) == len(pieces):
            return Added(source, base, "unchanged", len(old), digest, title)
        embedder, vectors = await self.memory._vectors(pieces)
        now = time.time()
        async with self.memory.store.transaction() as conn:  # one version bump for it all
            touched = [row.seq for row in old]
            if old:
                await conn.execute(m.delete().where(m.c.seq.in_(touched)))
            for index, (piece, vector) in enumerate(zip(pieces, vectors, strict=True)):
                key = f"{prefix}{digest[:16]}:{index}"
                value = {"text": piece, "source": source, "title": title, "sha256": digest,
                         "chunk": index, "chunks": len(pieces), "kind": "knowledge"}
                touched.append(await records.insert(
                    conn, id=_chunk_id(namespace, key), namespace=namespace, key=key, value=value,
                    text=piece, embedder=embedder, vector=vector, now=now, bump_version=False,
                ))
            await records.bump(conn, ns_key(namespace), touched)  # the caches learn which rows changed
        return Added(source, base, "replaced" if old else "added", len(pieces), digest, title)

    async def list(self, *, base: str | None = None, user_id: str | None = None) -> list[Document]:
        """The documents of one base (None: every base), by base then path."""
        from .store import LOCAL_USER

        user = user_id or LOCAL_USER
        prefix = knowledge_namespace(user, base) if base else (user, "knowledge")
        statement = sa.select(m.c.namespace, m.c.value, m.c.updated_at).where(
            m.c.user_id == user, records.under(m.c.namespace, [ns_key(prefix)])
        )
        async with self.memory.engine.connect() as conn:
            rows = (await conn.execute(statement)).all()
        found: dict[tuple[str, str], Document] = {}
        for row in rows:
            value = orjson.loads(row.value)
            name = records.ns_tuple(row.namespace)[2]
            doc = found.get((name, value.get("source", "")))
            if doc is None:
                found[(name, value.get("source", ""))] = Document(
                    value.get("source", ""), name, value.get("title"), 1, value.get("sha256", ""), row.updated_at
                )
            else:
                doc.chunks += 1
                doc.updated_at = max(doc.updated_at, row.updated_at)
        return sorted(found.values(), key=lambda d: (d.base, d.path))

    async def remove(
        self, sources: Sequence[str], *, base: str | None = None, user_id: str | None = None
    ) -> int:
        """Delete the chunks of documents (a path as given or resolved, or an `artifact:`
        source) from one base (None: every base); the number of chunks deleted."""
        from .store import LOCAL_USER

        user = user_id or LOCAL_USER
        prefix = knowledge_namespace(user, base) if base else (user, "knowledge")
        wanted = {_source_key(source) for source in sources}
        wanted |= {_source_key(resolved) for resolved in await asyncio.to_thread(_resolved, sources)}
        async with self.memory.store.transaction() as conn:
            rows = (await conn.execute(
                sa.select(m.c.seq, m.c.namespace, m.c.key).where(
                    m.c.user_id == user, records.under(m.c.namespace, [ns_key(prefix)])
                )
            )).all()
            gone = [row for row in rows if row.key.split(":", 1)[0] in wanted]
            if gone:
                await conn.execute(m.delete().where(m.c.seq.in_([row.seq for row in gone])))
                for namespace in {row.namespace for row in gone}:
                    await records.bump(conn, namespace, [row.seq for row in gone if row.namespace == namespace])
            deleted = len(gone)
        return deleted

    async def search(
        self, query: str, *, base: str | None = None, user_id: str | None = None, limit: int = 5,
        mode: str = "hybrid",
    ) -> MemorySearchResult:
        from .store import LOCAL_USER

        user = user_id or LOCAL_USER
        prefix = knowledge_namespace(user, base) if base else (user, "knowledge")
        return await self.memory.search_memories([prefix], query, mode=mode, limit=limit)


async def source_of(memory: MemoryStore, ids: Sequence[str]) -> dict[str, str]:
    """Chunk id → "file name, part i of n" (for the recalled section and search results)."""
    if not ids:
        return {}
    async with memory.engine.connect() as conn:
        rows = await records.by_ids(conn, list(ids))
    out: dict[str, str] = {}
    for chunk_id, row in rows.items():
        value = row.value
        source = str(value.get("source") or "")
        name = source if source.startswith("artifact:") else Path(source).name
        out[chunk_id] = f"{name}, part {int(value.get('chunk', 0)) + 1} of {value.get('chunks', 1)}"
    return out
