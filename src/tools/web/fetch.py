"""`fetch_urls`: download web pages and PDFs and hand the model readable text.

Design notes (the *why*):

* The model picks the URLs, so every URL and every redirect hop passes the SSRF guard
  (`ssrf.resolve_and_check`) before a request is sent; redirects are followed by hand for
  exactly that reason (``follow_redirects=False``). The connection is pinned to the address
  the guard approved, which closes the DNS-rebinding gap between "check" and "connect".
* Pinned connections are never reused (no keep-alive): the connection pool is keyed by IP,
  and two host names on one CDN address must not share a TLS session that was verified
  for only one of them.
* Cookies are not stored: URLs fetched in one batch must not leak state to one another.
* Bodies are streamed and reading stops at `max_download_bytes`, so a huge (or
  decompression-bomb) response costs at most that much memory. The per-URL `timeout` is a
  wall-clock budget for the whole chain (DNS, redirects, download), so a server that drips
  one byte at a time cannot hold the tool forever.
* HTML is turned into Markdown with boilerplate (scripts, styles, navigation, page header
  and footer, forms, asides) removed: the model's context is precious and navigation menus
  are noise. HTML and PDF parsing run in a worker thread to keep the event loop responsive.
* One failing URL never spoils the others: every URL gets its own entry with its own
  ``error``; the tool fails as a whole only when every URL failed.
"""

from __future__ import annotations

import asyncio
import codecs
import io
import re
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy
from importlib import metadata as _metadata
from typing import Any
from urllib.parse import urljoin

import httpx

from ..base import ToolResult
from .ssrf import BlockedAddressError, IPAddress, Resolver, resolve_and_check

MAX_URLS = 20
DEFAULT_MAX_DOWNLOAD_BYTES = 5 * 1024 * 1024
DEFAULT_CONCURRENCY = 5
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# How many of a host's approved addresses to try when connecting fails (e.g. IPv6 first on
# a machine without IPv6 connectivity).
MAX_ADDRESSES_TO_TRY = 3


def _version() -> str:
    try:
        return _metadata.version("artifactflow")
    except _metadata.PackageNotFoundError:
        return "0.1"


USER_AGENT = (
    f"Mozilla/5.0 (compatible; artifactflow/{_version()}; "
    "+https://pypi.org/project/artifactflow/) web-fetch tool"
)
ACCEPT = (
    "text/html,application/xhtml+xml,application/pdf;q=0.9,text/plain;q=0.8,"
    "application/json;q=0.8,*/*;q=0.5"
)

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

# Elements that never carry the page's readable content.
DROP_TAGS = (
    "script",
    "style",
    "noscript",
    "nav",
    "aside",
    "form",
    "template",
    "svg",
    "iframe",
    "object",
    "embed",
    "canvas",
    "button",
    "select",
    "input",
    "textarea",
    "dialog",
    "link",
    "meta",
)
# Page chrome: dropped at page level, kept inside an article (an article's own <header>
# usually holds its title and byline).
CHROME_TAGS = ("header", "footer")
CHROME_ROLES = ("navigation", "banner", "contentinfo", "complementary", "search", "menu")


class FetchError(Exception):
    """A per-URL failure with a message meant for the model."""


@dataclass(frozen=True)
class _Options:
    allow_private_networks: bool
    max_content_length: int
    max_redirects: int
    max_download_bytes: int
    timeout: float
    resolver: Resolver | None


# --------------------------------------------------------------------------- public API


async def fetch_urls(
    url_list: list[str],
    max_content_length: int = 20000,
    *,
    allow_private_networks: bool = False,
    timeout: float = 20.0,  # noqa: ASYNC109 - a per-URL budget, applied with asyncio.timeout
    max_redirects: int = 5,
    transport: httpx.AsyncBaseTransport | None = None,
    resolver: Resolver | None = None,
    max_download_bytes: int = DEFAULT_MAX_DOWNLOAD_BYTES,
    concurrency: int = DEFAULT_CONCURRENCY,
) -> ToolResult:
    """Fetch up to 20 URLs concurrently and return readable content for each.

    ``data`` is a list in input order of ``{"url", "final_url", "status", "content_type",
    "title", "content", "truncated", "error"}``. ``content`` is Markdown for HTML, extracted
    text for PDF and the body as-is for text and JSON, capped at `max_content_length`
    characters with a visible ``[... truncated: N of M characters shown]`` marker.
    ``status`` is the status of the last response received (a redirect's status when the
    redirect target was refused). A per-URL problem fills that entry's ``error``; the result
    fails only when every URL failed (``data`` still holds the entries).

    `timeout` is the wall-clock budget per URL, redirects and download included.
    `transport` and `resolver` are injection points (tests, custom DNS). Whatever the
    transport, each request is addressed to an IP that the SSRF check approved.
    """
    problem = _validate(url_list, max_content_length, timeout, max_redirects, max_download_bytes)
    if problem is not None:
        return ToolResult.fail(problem)
    opts = _Options(
        allow_private_networks=bool(allow_private_networks),
        max_content_length=max_content_length,
        max_redirects=max_redirects,
        max_download_bytes=max_download_bytes,
        timeout=float(timeout),
        resolver=resolver,
    )
    semaphore = asyncio.Semaphore(max(1, concurrency))
    async with _make_client(transport, opts.timeout, concurrency) as client:

        async def one(url: str) -> dict[str, Any]:
            async with semaphore:
                return await _fetch_one(client, url, opts)

        entries = list(await asyncio.gather(*(one(u) for u in url_list)))

    failed = [e for e in entries if e["error"] is not None]
    meta = {"succeeded": len(entries) - len(failed), "failed": len(failed)}
    if len(failed) == len(entries):
        details = "; ".join(f"{e['url']}: {_short(e['error'])}" for e in failed)
        noun = "URL" if len(entries) == 1 else f"all {len(entries)} URLs"
        return ToolResult(
            success=False, data=entries, error=f"{noun} failed to fetch: {details}", metadata=meta
        )
    return ToolResult(success=True, data=entries, metadata=meta)


def html_to_markdown(html: str, base_url: str | None = None) -> tuple[str | None, str]:
    """Readable Markdown for an HTML document: ``(title, markdown)``.

    Boilerplate is removed first, relative links are made absolute (the model cannot
    resolve them), and when the page marks its main content (``<main>``, or a single
    ``<article>``) holding most of the text, only that part is converted.
    """
    from bs4 import BeautifulSoup, Comment
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    title = _html_title(soup)
    base = base_url
    base_tag = soup.find("base", href=True)
    if base_tag is not None:
        base = urljoin(base_url or "", str(base_tag.get("href", "")).strip())

    for tag in soup.find_all(DROP_TAGS):
        if not tag.decomposed:
            tag.decompose()
    for comment in soup.find_all(string=lambda s: isinstance(s, Comment)):
        comment.extract()
    for tag in soup.find_all(CHROME_TAGS):
        if not tag.decomposed and tag.find_parent(["article", "main", "section"]) is None:
            tag.decompose()
    for tag in soup.find_all(attrs={"role": list(CHROME_ROLES)}):
        if not tag.decomposed:
            tag.decompose()
    for tag in soup.find_all(attrs={"aria-hidden": "true"}):
        if not tag.decomposed:
            tag.decompose()
    for tag in soup.find_all(attrs={"hidden": True}):
        if not tag.decomposed:
            tag.decompose()
    if soup.head is not None:
        soup.head.decompose()

    for a in soup.find_all("a"):
        href = str(a.get("href") or "").strip()
        if not href or href.lower().startswith(("javascript:", "vbscript:", "data:")):
            a.unwrap()
        elif base:
            a["href"] = urljoin(base, href)
    for img in soup.find_all("img"):
        src = str(img.get("src") or "").strip()
        if not src or src.lower().startswith("data:"):
            img.decompose()
        elif base:
            img["src"] = urljoin(base, src)

    root: Any = soup.body or soup
    articles = soup.find_all("article")
    candidate = soup.find("main") or (articles[0] if len(articles) == 1 else None)
    if candidate is not None:
        total = len(root.get_text(" ", strip=True))
        if total and len(candidate.get_text(" ", strip=True)) >= 0.3 * total:
            root = candidate

    converter = MarkdownConverter(
        heading_style="ATX",
        bullets="-",
        escape_misc=False,
        escape_underscores=False,
        escape_asterisks=False,
    )
    markdown = converter.convert_soup(root)
    return title, _tidy(markdown)


def pdf_to_text(data: bytes, max_chars: int | None = None) -> tuple[str | None, str, str | None]:
    """Text of a PDF: ``(title, text, note)``.

    Extraction stops after the page that takes the text past `max_chars` (the rest would be
    cut anyway and long PDFs are slow to parse); `note` then says where it stopped.
    """
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                opened = bool(reader.decrypt(""))  # PasswordType.NOT_DECRYPTED is 0
            except Exception:  # e.g. AES without the optional crypto dependency
                opened = False
            if not opened:
                raise FetchError("the PDF is encrypted and cannot be read")
        title = None
        try:
            info = reader.metadata
            if info is not None and info.title:
                title = str(info.title).strip() or None
        except Exception:  # broken metadata must not cost us the text
            title = None
        pages = reader.pages
        count = len(pages)
        parts: list[str] = []
        size = 0
        note = None
        for index, page in enumerate(pages):
            text = (page.extract_text() or "").strip()
            if text:
                parts.append(text)
                size += len(text) + 2
            if max_chars is not None and size > max_chars and index + 1 < count:
                note = f"text extraction stopped after page {index + 1} of {count}"
                break
    except FetchError:
        raise
    except Exception as exc:  # malformed PDFs fail in many ways inside pypdf
        raise FetchError(f"could not read the PDF: {type(exc).__name__}: {exc}") from None
    return title, "\n\n".join(parts), note


# --------------------------------------------------------------------------- internals


def _validate(
    url_list: Any,
    max_content_length: Any,
    timeout: Any,
    max_redirects: Any,
    max_download_bytes: Any,
) -> str | None:
    if isinstance(url_list, str):
        return "url_list must be a list of URLs, not a single string; wrap it in a list"
    if not isinstance(url_list, list | tuple):
        return f"url_list must be a list of URLs, got {type(url_list).__name__}"
    if not url_list:
        return "url_list is empty; pass at least one http(s) URL"
    if len(url_list) > MAX_URLS:
        return f"too many URLs: {len(url_list)} given, at most {MAX_URLS} per call"
    bad = [i for i, u in enumerate(url_list) if not isinstance(u, str) or not u.strip()]
    if bad:
        return f"url_list entries must be non-empty strings; bad entries at positions {bad}"
    if isinstance(max_content_length, bool) or not isinstance(max_content_length, int):
        return "max_content_length must be a positive integer"
    if max_content_length <= 0:
        return f"max_content_length must be a positive integer, got {max_content_length}"
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
        return f"timeout must be a positive number of seconds, got {timeout!r}"
    if isinstance(max_redirects, bool) or not isinstance(max_redirects, int) or max_redirects < 0:
        return f"max_redirects must be a non-negative integer, got {max_redirects!r}"
    if (
        isinstance(max_download_bytes, bool)
        or not isinstance(max_download_bytes, int)
        or max_download_bytes <= 0
    ):
        return f"max_download_bytes must be a positive integer, got {max_download_bytes!r}"
    return None


def _make_client(
    transport: httpx.AsyncBaseTransport | None, timeout: float, concurrency: int
) -> httpx.AsyncClient:
    no_cookies = CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))
    return httpx.AsyncClient(
        transport=transport,
        follow_redirects=False,
        timeout=httpx.Timeout(timeout),
        headers={
            "User-Agent": USER_AGENT,
            "Accept": ACCEPT,
            "Accept-Language": "en;q=0.9, *;q=0.5",
        },
        cookies=no_cookies,
        limits=httpx.Limits(max_connections=max(1, concurrency) * 2, max_keepalive_connections=0),
    )


def _new_entry(url: str) -> dict[str, Any]:
    return {
        "url": url,
        "final_url": None,
        "status": None,
        "content_type": None,
        "title": None,
        "content": "",
        "truncated": False,
        "error": None,
    }


async def _fetch_one(client: httpx.AsyncClient, url: str, opts: _Options) -> dict[str, Any]:
    """Fetch one URL into a result entry; every failure becomes the entry's ``error``."""
    entry = _new_entry(url)
    try:
        async with asyncio.timeout(opts.timeout):
            await _fetch_into(entry, client, url.strip(), opts)
    except TimeoutError:
        entry["error"] = f"timed out after {opts.timeout:g} seconds"
    except (BlockedAddressError, FetchError) as exc:
        entry["error"] = str(exc)
    except httpx.TimeoutException:
        entry["error"] = f"timed out after {opts.timeout:g} seconds"
    except httpx.HTTPError as exc:
        entry["error"] = f"request failed: {type(exc).__name__}: {exc or 'no details'}"
    except Exception as exc:  # the tool must not raise; report instead
        entry["error"] = f"unexpected error: {type(exc).__name__}: {exc}"
    if entry["error"] is not None:
        entry["content"] = ""
        entry["truncated"] = False
    return entry


async def _fetch_into(
    entry: dict[str, Any], client: httpx.AsyncClient, url: str, opts: _Options
) -> None:
    current = url
    for hop in range(opts.max_redirects + 1):
        entry["final_url"] = current
        try:
            addresses = await resolve_and_check(
                current,
                allow_private_networks=opts.allow_private_networks,
                resolver=opts.resolver,
            )
        except BlockedAddressError as exc:
            if hop == 0:
                raise
            raise BlockedAddressError(f"redirect refused: {exc}") from None
        response = await _send(client, current, addresses)
        try:
            entry["status"] = response.status_code
            if response.status_code in REDIRECT_STATUSES:
                location = response.headers.get("location", "").strip()
                if not location:
                    raise FetchError(
                        f"HTTP {response.status_code} redirect without a Location header"
                    )
                if hop == opts.max_redirects:
                    raise FetchError(f"too many redirects (more than {opts.max_redirects})")
                try:
                    current = str(httpx.URL(current).join(location))
                except (httpx.InvalidURL, ValueError) as exc:
                    raise FetchError(f"invalid redirect location {location!r}: {exc}") from None
                continue
            await _read_response(entry, response, opts)
            return
        finally:
            await response.aclose()


async def _send(client: httpx.AsyncClient, url: str, addresses: list[IPAddress]) -> httpx.Response:
    """Send a GET for `url`, connecting to one of the approved `addresses` when given.

    The URL's host is replaced by the IP; the ``Host`` header and (for https) the TLS SNI
    name, which is also the name the certificate is verified against, keep the original
    host, so virtual hosting and certificate checks work as without pinning.
    """
    parsed = httpx.URL(url)
    host = parsed.raw_host.decode("ascii").rstrip(".")
    if not addresses or [str(a) for a in addresses] == [host]:
        # Nothing to pin (private networks allowed), or a canonical IP literal: the client
        # connects to exactly the checked address anyway.
        return await client.send(client.build_request("GET", parsed), stream=True)
    headers = {"Host": parsed.netloc.decode("ascii")}
    extensions = {"sni_hostname": host} if parsed.scheme == "https" else {}
    last_error: httpx.ConnectError | None = None
    for address in addresses[:MAX_ADDRESSES_TO_TRY]:
        wire_url = parsed.copy_with(host=str(address))
        request = client.build_request("GET", wire_url, headers=headers, extensions=extensions)
        try:
            return await client.send(request, stream=True)
        except httpx.ConnectError as exc:
            last_error = exc
    assert last_error is not None
    raise last_error


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


async def _read_response(entry: dict[str, Any], response: httpx.Response, opts: _Options) -> None:
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


def _short(text: str | None, limit: int = 200) -> str:
    text = text or "unknown error"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _html_title(soup: Any) -> str | None:
    candidates = []
    if soup.title is not None and soup.title.string:
        candidates.append(soup.title.string)
    og = soup.find("meta", attrs={"property": "og:title"})
    if og is not None and og.get("content"):
        candidates.append(og.get("content"))
    h1 = soup.find("h1")
    if h1 is not None:
        candidates.append(h1.get_text(" ", strip=True))
    for candidate in candidates:
        title = " ".join(str(candidate).split())
        if title:
            return title
    return None


def _tidy(markdown: str) -> str:
    lines = [line.rstrip() for line in markdown.splitlines()]
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()
