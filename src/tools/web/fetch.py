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
* Bodies are streamed and reading stops at `max_download_bytes` (``body.py``). The per-URL
  `timeout` is a wall-clock budget for the whole chain (DNS, redirects, download), so a
  server that drips one byte at a time cannot hold the tool forever.
* HTML is turned into Markdown without its boilerplate, PDFs into text (``extract.py``);
  both run in a worker thread to keep the event loop responsive.
* One failing URL never spoils the others: every URL gets its own entry with its own
  ``error``; the tool fails as a whole only when every URL failed.
"""

from __future__ import annotations

import asyncio
from http.cookiejar import CookieJar, DefaultCookiePolicy
from importlib import metadata as _metadata
from typing import Any

import httpx

from ..base import ToolResult
from .body import FetchOptions, read_response
from .extract import FetchError, html_to_markdown, pdf_to_text
from .ssrf import BlockedAddressError, IPAddress, Resolver, resolve_and_check

__all__ = [
    "DEFAULT_MAX_DOWNLOAD_BYTES",
    "MAX_URLS",
    "USER_AGENT",
    "FetchError",
    "fetch_urls",
    "html_to_markdown",
    "pdf_to_text",
]

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
    opts = FetchOptions(
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


async def _fetch_one(client: httpx.AsyncClient, url: str, opts: FetchOptions) -> dict[str, Any]:
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
    entry: dict[str, Any], client: httpx.AsyncClient, url: str, opts: FetchOptions
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
            await read_response(entry, response, opts)
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


def _short(text: str | None, limit: int = 200) -> str:
    text = text or "unknown error"
    return text if len(text) <= limit else text[: limit - 3] + "..."
