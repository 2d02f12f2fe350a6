"""Turn one final HTTP response into a result entry's text, within fixed budgets.

The kind of document comes from the Content-Type, or from sniffing the first bytes when the
server does not say; anything that is not HTML, PDF, text or JSON is refused with a message
naming what the tool reads. The body is streamed and reading stops at `max_download_bytes`,
so a huge (or decompression-bomb) response costs at most that much memory; text is decoded
with the declared charset, a BOM or an HTML ``<meta charset>``, and cut to
`max_content_length` characters behind a marker the model cannot miss.
"""

from __future__ import annotations

import asyncio
import codecs
import re
from dataclasses import dataclass
from typing import Any

import httpx

from .extract import FetchError, html_to_markdown, pdf_to_text
from .ssrf import Resolver

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
PDF_TYPES = frozenset({"application/pdf", "application/x-pdf"})
TEXT_APPLICATION_TYPES = frozenset(
    {
        "application/json",
        "application/ld+json",
        "application/xml",
        "application/javascript",
        "application/x-ndjson",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
    }
)
# Types that say nothing about the content; the body is sniffed instead.
UNTYPED = frozenset({"", "application/octet-stream", "binary/octet-stream"})


@dataclass(frozen=True)
class FetchOptions:
    """The limits of one `fetch_urls` call, shared by every URL in it."""

    allow_private_networks: bool
    max_content_length: int
    max_redirects: int
    max_download_bytes: int
    timeout: float
    resolver: Resolver | None


async def _read_capped(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """Up to `limit` bytes of the (decompressed) body and whether it was cut off."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        if size + len(chunk) > limit:
            chunks.append(chunk[: limit - size])
            return b"".join(chunks), True
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks), False


def _mime(response: httpx.Response) -> str:
    return response.headers.get("content-type", "").split(";", 1)[0].strip().lower()


def _kind_from_mime(mime: str) -> str | None:
    if mime in HTML_TYPES:
        return "html"
    if mime in PDF_TYPES:
        return "pdf"
    if mime.startswith("text/") or mime in TEXT_APPLICATION_TYPES:
        return "text"
    if mime.endswith(("+json", "+xml")):
        return "text"
    if mime in UNTYPED:
        return None
    return "unsupported"


def _sniff(body: bytes) -> str:
    head = body[:1024].lstrip().lower()
    if head.startswith(b"%pdf-"):
        return "pdf"
    if head.startswith((b"<!doctype html", b"<html")) or b"<html" in head:
        return "html"
    sample = body[:4096]
    if b"\x00" in sample:
        return "unsupported"
    try:
        sample.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(sample) - 4:  # a cut multi-byte char at the end is fine
            return "unsupported"
    return "text"


_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([a-zA-Z0-9_\-:.]+)""", re.I)


def _decode(body: bytes, response: httpx.Response, kind: str) -> str:
    """Decode with the declared charset, a BOM or an HTML <meta charset>, else UTF-8."""
    encoding = response.charset_encoding
    if body.startswith(codecs.BOM_UTF8):
        encoding = "utf-8-sig"
    elif body.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    elif not encoding and kind == "html":
        match = _META_CHARSET.search(body[:4096])
        if match:
            encoding = match.group(1).decode("ascii", "ignore")
    try:
        codecs.lookup(encoding or "utf-8")
    except LookupError:
        encoding = None
    return body.decode(encoding or "utf-8", errors="replace")


async def read_response(
    entry: dict[str, Any], response: httpx.Response, opts: FetchOptions
) -> None:
    mime = _mime(response)
    entry["content_type"] = mime or None
    status = response.status_code
    if status >= 400:
        reason = response.reason_phrase or ""
        raise FetchError(f"HTTP {status} {reason}".strip())
    if not 200 <= status < 300:
        raise FetchError(f"unexpected HTTP status {status}")

    kind = _kind_from_mime(mime)
    if kind == "unsupported":
        raise FetchError(
            f"unsupported content type {mime!r}; fetch_urls reads HTML, PDF, plain text and JSON"
        )
    declared = response.headers.get("content-length", "")
    if kind == "pdf" and declared.isdigit() and int(declared) > opts.max_download_bytes:
        raise FetchError(_pdf_too_large(opts.max_download_bytes))

    body, cut = await _read_capped(response, opts.max_download_bytes)
    if kind is None:
        kind = _sniff(body)
        if kind == "unsupported":
            shown = mime or "none"
            raise FetchError(
                f"unsupported content type ({shown}; the body looks binary); fetch_urls reads "
                "HTML, PDF, plain text and JSON"
            )

    note: str | None = None
    title: str | None = None
    if kind == "pdf":
        if cut:
            raise FetchError(_pdf_too_large(opts.max_download_bytes))
        title, text, note = await asyncio.to_thread(pdf_to_text, body, opts.max_content_length)
    else:
        decoded = _decode(body, response, kind)
        if kind == "html" and "<" in decoded:
            title, text = await asyncio.to_thread(html_to_markdown, decoded, entry["final_url"])
            if not text:
                text = "[no readable text found; the page may need JavaScript to render]"
        else:
            text = decoded
        if cut:
            note = (
                f"download stopped at the {_mb(opts.max_download_bytes)} limit, "
                "so the document is longer"
            )
    entry["title"] = title
    entry["content"], entry["truncated"] = _cap(text, opts.max_content_length, note)


def _cap(text: str, limit: int, note: str | None) -> tuple[str, bool]:
    """Cut `text` to `limit` characters and say so in a marker the model cannot miss."""
    if len(text) <= limit and note is None:
        return text, False
    shown = min(len(text), limit)
    detail = f"{shown} of {len(text)} characters shown"
    if note:
        detail += f"; {note}"
    return f"{text[:limit]}\n\n[... truncated: {detail}]", True


def _pdf_too_large(limit: int) -> str:
    return f"the PDF is larger than the {_mb(limit)} download limit and was not read"


def _mb(size: int) -> str:
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):g} MB"
    return f"{size} byte"
