"""Tests for the web tools: SSRF guard, fetch_urls and web_search.

Nothing here touches the internet. Fetches go to a stdlib HTTP server on 127.0.0.1 (with
``allow_private_networks=True``), and refusals are checked *before* connecting, so the
private addresses in these tests are never contacted: recording transports prove it.
To exercise the policy on a redirect chain, a fake resolver maps ``public.example`` to a
public address and a routing transport delivers every request to the local server while
recording where the request was addressed.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from artifactflow.tools.web import (
    BlockedAddressError,
    DNSResolutionError,
    SearchConfigError,
    SearxngProvider,
    check_url,
    fetch_urls,
    html_to_markdown,
    make_provider,
    pdf_to_text,
    web_search,
)

PUBLIC_IP = "93.184.216.34"

HTML_PAGE = """<!doctype html>
<html><head><title>Test Page Title</title>
<script>var secret = "SCRIPT_SECRET";</script>
<style>.x { color: red }</style></head>
<body>
<header><div>SITE_HEADER_TEXT</div></header>
<nav><a href="/home">NAV_LINK_TEXT</a></nav>
<main>
<h1>Main Heading</h1>
<p>Intro paragraph with a <a href="/other">relative link</a>.</p>
<h2>Sub heading</h2>
<ul><li>first item</li><li>second item</li></ul>
<script>alert("INLINE_SCRIPT")</script>
<noscript>NOSCRIPT_TEXT</noscript>
</main>
<aside>ASIDE_TEXT</aside>
<form><input name="q"><button>FORM_BUTTON</button></form>
<footer>FOOTER_TEXT</footer>
</body></html>
"""

LARGE_TEXT = "".join(f"line {i:05d} of the large page\n" for i in range(2000))


def make_pdf(text: str = "Hello PDF world", title: str = "Tiny PDF") -> bytes:
    """A minimal valid one-page PDF with a Helvetica text object and correct xref offsets."""
    content = f"BT /F1 24 Tf 72 720 Td ({text}) Tj ET".encode("latin-1")
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
        b"/Resources << /Font << /F1 4 0 R >> >> /Contents 5 0 R >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Title (" + title.encode("latin-1") + b") >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref_at = len(out)
    out += b"xref\n0 %d\n" % (len(objects) + 1)
    out += b"0000000000 65535 f \n"
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R /Info 6 0 R >>\n" % (len(objects) + 1)
    out += b"startxref\n%d\n%%%%EOF\n" % xref_at
    return bytes(out)


PDF_BYTES = make_pdf()


# --------------------------------------------------------------------------- local server


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def _send(self, status: int, body: bytes, ctype: str, extra: dict[str, str] | None = None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, location: str) -> None:
        self._send(302, b"", "text/plain", {"Location": location})

    def _json(self, payload: Any, status: int = 200) -> None:
        self._send(status, json.dumps(payload).encode(), "application/json")

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        self._record(body)
        if self.path == "/tavily/search":
            if self.headers.get("Authorization") != "Bearer tv-key":
                return self._json({"detail": "bad key"}, 401)
            query = json.loads(body)
            return self._json(
                {
                    "results": [
                        {"title": "T1", "url": "https://t.example/1", "content": query["query"]},
                    ]
                }
            )
        self._send(404, b"not found", "text/plain")

    def _record(self, body: bytes = b"") -> None:
        split = urlsplit(self.path)
        self.server.log.append(
            {
                "path": split.path,
                "query": parse_qs(split.query),
                "headers": dict(self.headers.items()),
                "body": body,
            }
        )

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._record()
        path = urlsplit(self.path).path
        query = parse_qs(urlsplit(self.path).query)
        if path == "/page.html":
            return self._send(200, HTML_PAGE.encode(), "text/html; charset=utf-8")
        if path == "/doc.pdf":
            return self._send(200, PDF_BYTES, "application/pdf")
        if path == "/doc-untyped":
            return self._send(200, PDF_BYTES, "application/octet-stream")
        if path == "/large.txt":
            return self._send(200, LARGE_TEXT.encode(), "text/plain; charset=utf-8")
        if path == "/data.json":
            return self._send(200, b'{"answer": 42}', "application/json")
        if path == "/image.png":
            return self._send(200, b"\x89PNG\r\n\x1a\n" + b"\x00" * 64, "image/png")
        if path == "/missing":
            return self._send(404, b"nothing here", "text/plain")
        if path == "/redirect":
            return self._redirect("/page.html")
        if path == "/redirect-private":
            return self._redirect("http://10.0.0.1/")
        if path == "/redirect-metadata":
            return self._redirect("http://169.254.169.254/latest/meta-data")
        if path == "/redirect-localhost":
            return self._redirect(f"http://localhost:{self.server.server_port}/page.html")
        if path == "/loop":
            return self._redirect("/loop")
        if path == "/slow":
            self.server.closing.wait(1.5)  # longer than the client's timeout, unless closing
            return self._send(200, b"late", "text/plain")
        # --- fake search engines
        if path == "/searx/search":
            return self._json(
                {
                    "query": query.get("q", [""])[0],
                    "results": [
                        {"title": "First", "url": "https://a.example/1", "content": "one"},
                        {"title": "Second", "url": "https://a.example/2", "content": "two"},
                        {"title": "Third", "url": "https://a.example/3", "content": "three"},
                    ],
                }
            )
        if path == "/brave/web/search":
            if self.headers.get("X-Subscription-Token") != "test-key":
                return self._json({"error": "unauthorized"}, 401)
            return self._json(
                {
                    "web": {
                        "results": [
                            {
                                "title": "Brave &amp; Co",
                                "url": "https://b.example/",
                                "description": "a <strong>bold</strong> claim",
                            }
                        ]
                    }
                }
            )
        if path in ("/broken/search", "/broken/web/search"):
            return self._send(500, b"engine exploded", "text/plain")
        if path == "/malformed/search":
            return self._send(200, b"{not json", "application/json")
        if path == "/slowsearch/search":
            self.server.closing.wait(1.5)
            return self._json({"results": []})
        self._send(404, b"not found", "text/plain")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.log: list[dict[str, Any]] = []
        self.closing = threading.Event()  # wakes the handlers that stall on purpose

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients that time out on purpose close their sockets; that is expected


@pytest.fixture(scope="module")
def server() -> Iterator[_Server]:
    srv = _Server()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.closing.set()
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=5)


@pytest.fixture
def base(server: _Server) -> str:
    return f"http://127.0.0.1:{server.server_port}"


@pytest.fixture(autouse=True)
def _no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """Environment proxies would divert the requests meant for the local server."""
    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)


def fake_dns(mapping: dict[str, list[str]]):
    """A resolver for the tests: known names map to fixed addresses, others fail."""

    async def resolve(host: str, port: int) -> list[str]:
        if host in mapping:
            return mapping[host]
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    return resolve


class RecordingTransport(httpx.AsyncBaseTransport):
    """Records every request; answers 200 without touching the network."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return httpx.Response(200, text="should not happen", headers={"Content-Type": "text/plain"})


class LoopbackRouter(httpx.AsyncBaseTransport):
    """Delivers every request to the local server, recording the address it was meant for."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.inner = httpx.AsyncHTTPTransport()
        self.seen: list[tuple[str, str | None, str]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append((request.url.host, request.headers.get("host"), request.url.path))
        request.url = request.url.copy_with(host="127.0.0.1", port=self.port)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def entry_for(result: Any, index: int = 0) -> dict[str, Any]:
    assert isinstance(result.data, list)
    return result.data[index]


# --------------------------------------------------------------------------- SSRF guard


@pytest.mark.parametrize(
    "url, fragment",
    [
        ("http://127.0.0.1/", "loopback"),
        ("http://10.1.2.3/", "private"),
        ("http://169.254.169.254/latest/meta-data", "link-local"),
        ("http://[::1]:8080/", "loopback"),
        ("http://[fe80::1]/", "link-local"),
        ("http://[fd00::1]/", "private"),
        ("http://[::ffff:127.0.0.1]/", "127.0.0.1"),
        ("http://100.64.0.1/", "carrier-grade NAT"),
        ("http://0.0.0.0/", "unspecified"),
        ("http://224.0.0.1/", "multicast"),
        ("http://2130706433/", "127.0.0.1"),
        ("http://127.1/", "127.0.0.1"),
        ("http://192.168.1.1/", "private"),
        ("http://172.16.5.4/", "private"),
        ("http://localhost/", "internal host name"),
        ("http://LOCALHOST./", "internal host name"),
        ("http://metadata.google.internal/computeMetadata/v1/", "internal host name"),
        ("http://intranet/", "single-label"),
        ("file:///etc/passwd", "'file:' scheme"),
        ("ftp://x/", "'ftp:' scheme"),
        ("gopher://x/", "'gopher:' scheme"),
        ("data:text/plain,hello", "'data:' scheme"),
        ("example.com/page", "no scheme"),
        ("http:///nohost", "no host"),
    ],
)
@pytest.mark.asyncio
async def test_check_url_refuses(url: str, fragment: str) -> None:
    with pytest.raises(BlockedAddressError) as caught:
        await check_url(url, allow_private_networks=False, resolver=fake_dns({}))
    assert fragment in str(caught.value)


@pytest.mark.asyncio
async def test_check_url_resolves_every_record() -> None:
    dns = fake_dns(
        {
            "public.example": [PUBLIC_IP, "2606:2800:220:1:248:1893:25c8:1946"],
            "intranet.example": ["10.0.0.7"],
            "mixed.example": [PUBLIC_IP, "192.168.1.5"],
        }
    )
    await check_url("https://public.example/x", allow_private_networks=False, resolver=dns)
    await check_url("http://8.8.8.8/", allow_private_networks=False, resolver=dns)
    with pytest.raises(BlockedAddressError, match=r"resolves to 10\.0\.0\.7"):
        await check_url("http://intranet.example/", allow_private_networks=False, resolver=dns)
    with pytest.raises(BlockedAddressError, match=r"resolves to 192\.168\.1\.5"):
        await check_url("http://mixed.example/", allow_private_networks=False, resolver=dns)
    with pytest.raises(DNSResolutionError, match="could not resolve host 'nowhere.example'"):
        await check_url("http://nowhere.example/", allow_private_networks=False, resolver=dns)


@pytest.mark.asyncio
async def test_check_url_allow_private_still_checks_scheme() -> None:
    await check_url("http://127.0.0.1:1/", allow_private_networks=True)
    await check_url("http://localhost/", allow_private_networks=True)
    with pytest.raises(BlockedAddressError, match="'file:' scheme"):
        await check_url("file:///etc/passwd", allow_private_networks=True)


@pytest.mark.asyncio
async def test_fetch_refuses_before_any_request(server: _Server) -> None:
    port = server.server_port
    urls = [
        f"http://127.0.0.1:{port}/page.html",
        "http://10.1.2.3/",
        "http://169.254.169.254/latest/meta-data",
        f"http://[::1]:{port}/page.html",
        "file:///etc/passwd",
        "ftp://x/",
        f"http://localhost:{port}/page.html",
    ]
    transport = RecordingTransport()
    before = len(server.log)
    result = await fetch_urls(urls, transport=transport, resolver=fake_dns({}))
    assert result.success is False
    assert "all 7 URLs failed" in (result.error or "")
    assert [e["url"] for e in result.data] == urls
    for entry in result.data:
        assert entry["error"] and "refused" in entry["error"]
        assert entry["content"] == ""
    assert transport.requests == []
    assert len(server.log) == before  # the real server saw nothing either


@pytest.mark.asyncio
async def test_fetch_refuses_real_loopback_server(server: _Server) -> None:
    """With the default transport too, the loopback server is never contacted."""
    port = server.server_port
    before = len(server.log)
    result = await fetch_urls(
        [f"http://127.0.0.1:{port}/page.html", f"http://[::1]:{port}/page.html"]
    )
    assert result.success is False
    assert all("loopback" in e["error"] for e in result.data)
    assert len(server.log) == before


@pytest.mark.parametrize(
    "path, target",
    [
        ("/redirect-private", "10.0.0.1"),
        ("/redirect-metadata", "169.254.169.254"),
        ("/redirect-localhost", "localhost"),
    ],
)
@pytest.mark.asyncio
async def test_redirect_to_private_address_is_refused(
    server: _Server, path: str, target: str
) -> None:
    router = LoopbackRouter(server.server_port)
    dns = fake_dns({"public.example": [PUBLIC_IP]})
    result = await fetch_urls([f"http://public.example{path}"], transport=router, resolver=dns)
    entry = entry_for(result)
    assert result.success is False
    assert entry["error"].startswith("redirect refused:")
    assert target in entry["error"]
    assert entry["status"] == 302
    assert target in entry["final_url"]
    # Exactly one request went out: the first hop, pinned to the approved address.
    assert router.seen == [(PUBLIC_IP, "public.example", path)]


@pytest.mark.asyncio
async def test_public_redirect_is_followed_and_pinned(server: _Server) -> None:
    router = LoopbackRouter(server.server_port)
    dns = fake_dns({"public.example": [PUBLIC_IP]})
    result = await fetch_urls(["http://public.example/redirect"], transport=router, resolver=dns)
    assert result.success is True, result.error
    entry = entry_for(result)
    assert entry["final_url"] == "http://public.example/page.html"
    assert entry["title"] == "Test Page Title"
    # Relative links resolve against the logical URL, not the pinned IP.
    assert "(http://public.example/other)" in entry["content"]
    assert router.seen == [
        (PUBLIC_IP, "public.example", "/redirect"),
        (PUBLIC_IP, "public.example", "/page.html"),
    ]


@pytest.mark.asyncio
async def test_https_pinning_keeps_host_and_sni() -> None:
    transport = RecordingTransport()
    dns = fake_dns({"public.example": [PUBLIC_IP]})
    result = await fetch_urls(
        ["https://public.example:8443/a?b=1"], transport=transport, resolver=dns
    )
    assert result.success is True, result.error
    (request,) = transport.requests
    assert request.url.host == PUBLIC_IP
    assert request.url.port == 8443
    assert request.url.raw_path == b"/a?b=1"
    assert request.headers["host"] == "public.example:8443"
    assert request.extensions["sni_hostname"] == "public.example"
    assert entry_for(result)["final_url"] == "https://public.example:8443/a?b=1"


class FlakyFirstAddress(RecordingTransport):
    """Connecting to the first address fails, as with IPv6 on an IPv4-only machine."""

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if request.url.host == "2606:2800:220:1:248:1893:25c8:1946":
            raise httpx.ConnectError("network unreachable", request=request)
        return httpx.Response(200, text="ok", headers={"Content-Type": "text/plain"})


@pytest.mark.asyncio
async def test_next_approved_address_is_tried_when_connect_fails() -> None:
    transport = FlakyFirstAddress()
    dns = fake_dns({"public.example": ["2606:2800:220:1:248:1893:25c8:1946", PUBLIC_IP]})
    result = await fetch_urls(["http://public.example/"], transport=transport, resolver=dns)
    assert result.success is True, result.error
    assert entry_for(result)["content"] == "ok"
    assert [r.url.host for r in transport.requests] == [
        "2606:2800:220:1:248:1893:25c8:1946",
        PUBLIC_IP,
    ]


@pytest.mark.asyncio
async def test_dns_failure_is_a_clear_error() -> None:
    transport = RecordingTransport()
    result = await fetch_urls(
        ["http://nowhere.example/"], transport=transport, resolver=fake_dns({})
    )
    assert result.success is False
    assert "could not resolve host 'nowhere.example'" in entry_for(result)["error"]
    assert transport.requests == []


# --------------------------------------------------------------------------- fetching


@pytest.mark.asyncio
async def test_html_becomes_markdown(base: str) -> None:
    result = await fetch_urls([f"{base}/page.html"], allow_private_networks=True)
    assert result.success is True, result.error
    entry = entry_for(result)
    assert entry["error"] is None
    assert entry["status"] == 200
    assert entry["content_type"] == "text/html"
    assert entry["title"] == "Test Page Title"
    assert entry["final_url"] == f"{base}/page.html"
    assert entry["truncated"] is False
    content = entry["content"]
    assert "# Main Heading" in content
    assert "## Sub heading" in content
    assert "- first item" in content and "- second item" in content
    assert f"[relative link]({base}/other)" in content
    for dropped in (
        "SCRIPT_SECRET",
        "INLINE_SCRIPT",
        "NOSCRIPT_TEXT",
        "color: red",
        "NAV_LINK_TEXT",
        "SITE_HEADER_TEXT",
        "FOOTER_TEXT",
        "ASIDE_TEXT",
        "FORM_BUTTON",
    ):
        assert dropped not in content


@pytest.mark.asyncio
async def test_user_agent_identifies_artifactflow(server: _Server, base: str) -> None:
    await fetch_urls([f"{base}/data.json"], allow_private_networks=True)
    agent = server.log[-1]["headers"].get("User-Agent", "")
    assert "artifactflow" in agent and agent.startswith("Mozilla/5.0")


def test_pdf_fixture_is_readable() -> None:
    title, text, note = pdf_to_text(PDF_BYTES)
    assert "Hello PDF world" in text
    assert title == "Tiny PDF"
    assert note is None


@pytest.mark.asyncio
async def test_pdf_text(base: str) -> None:
    result = await fetch_urls(
        [f"{base}/doc.pdf", f"{base}/doc-untyped"], allow_private_networks=True
    )
    assert result.success is True
    for entry in result.data:
        assert entry["error"] is None, entry["error"]
        assert "Hello PDF world" in entry["content"]
        assert entry["title"] == "Tiny PDF"
    assert result.data[0]["content_type"] == "application/pdf"


@pytest.mark.asyncio
async def test_truncation_marker(base: str) -> None:
    result = await fetch_urls([f"{base}/large.txt"], 1000, allow_private_networks=True)
    entry = entry_for(result)
    assert entry["truncated"] is True
    assert entry["content"].startswith(LARGE_TEXT[:1000])
    assert entry["content"].endswith(
        f"\n\n[... truncated: 1000 of {len(LARGE_TEXT)} characters shown]"
    )


@pytest.mark.asyncio
async def test_download_cap(base: str) -> None:
    result = await fetch_urls(
        [f"{base}/large.txt", f"{base}/doc.pdf"],
        100_000,
        allow_private_networks=True,
        max_download_bytes=200,
    )
    text_entry, pdf_entry = result.data
    assert text_entry["error"] is None
    assert text_entry["truncated"] is True
    assert text_entry["content"].startswith(LARGE_TEXT[:200])
    assert "download stopped at the 200 byte limit" in text_entry["content"]
    assert "larger than the 200 byte download limit" in pdf_entry["error"]


@pytest.mark.asyncio
async def test_per_url_errors_keep_order_and_do_not_fail_the_rest(base: str) -> None:
    urls = [
        f"{base}/missing",
        f"{base}/page.html",
        f"{base}/image.png",
        f"{base}/data.json",
        f"{base}/doc.pdf",
        "ftp://nope/",
    ]
    result = await fetch_urls(urls, allow_private_networks=True)
    assert result.success is True
    assert [e["url"] for e in result.data] == urls
    missing, page, image, data, pdf, ftp = result.data
    assert missing["status"] == 404 and "HTTP 404" in missing["error"]
    assert page["error"] is None and page["title"] == "Test Page Title"
    assert "unsupported content type 'image/png'" in image["error"]
    assert data["error"] is None and data["content"] == '{"answer": 42}'
    assert pdf["error"] is None and "Hello PDF world" in pdf["content"]
    assert "'ftp:' scheme" in ftp["error"]
    assert result.metadata == {"succeeded": 3, "failed": 3}


@pytest.mark.asyncio
async def test_local_redirect_is_followed(base: str) -> None:
    result = await fetch_urls([f"{base}/redirect"], allow_private_networks=True)
    entry = entry_for(result)
    assert entry["error"] is None
    assert entry["final_url"] == f"{base}/page.html"
    assert entry["status"] == 200


@pytest.mark.asyncio
async def test_redirect_loop_stops(base: str) -> None:
    result = await fetch_urls([f"{base}/loop"], allow_private_networks=True, max_redirects=2)
    assert result.success is False
    assert "too many redirects (more than 2)" in entry_for(result)["error"]


@pytest.mark.asyncio
async def test_timeout_is_reported(base: str) -> None:
    started = time.monotonic()
    result = await fetch_urls([f"{base}/slow"], allow_private_networks=True, timeout=0.3)
    assert time.monotonic() - started < 1.2
    assert "timed out after 0.3 seconds" in entry_for(result)["error"]


@pytest.mark.parametrize(
    "args, message",
    [
        (([],), "url_list is empty"),
        ((["http://a.example/"] * 21,), "too many URLs: 21"),
        ((["http://a.example/"], 0), "max_content_length must be a positive integer"),
        (("http://a.example/",), "not a single string"),
        (([""],), "non-empty strings"),
    ],
)
@pytest.mark.asyncio
async def test_input_validation(args: tuple[Any, ...], message: str) -> None:
    transport = RecordingTransport()
    result = await fetch_urls(*args, transport=transport)
    assert result.success is False
    assert message in (result.error or "")
    assert transport.requests == []


def test_html_to_markdown_keeps_article_header() -> None:
    html = (
        "<html><body><header>SITE</header><article><header><h1>Post title</h1>"
        "<p>by someone</p></header><p>Body text <a href='javascript:alert(1)'>x</a></p>"
        "</article></body></html>"
    )
    title, markdown = html_to_markdown(html, "https://blog.example/post")
    assert title == "Post title"  # no <title>: the first h1
    assert "# Post title" in markdown
    assert "SITE" not in markdown
    assert "javascript:" not in markdown


# --------------------------------------------------------------------------- search


def searx_config(base: str, path: str = "/searx") -> dict[str, Any]:
    return {"provider": "searxng", "searxng_url": base + path}


@pytest.mark.asyncio
async def test_searxng_search(server: _Server, base: str) -> None:
    result = await web_search("hello world", 2, config=searx_config(base), env={})
    assert result.success is True, result.error
    assert result.data == [
        {"title": "First", "url": "https://a.example/1", "snippet": "one"},
        {"title": "Second", "url": "https://a.example/2", "snippet": "two"},
    ]
    assert result.metadata["provider"] == "searxng"
    request = server.log[-1]
    assert request["path"] == "/searx/search"
    assert request["query"] == {"q": ["hello world"], "format": ["json"]}


@pytest.mark.asyncio
async def test_brave_search_sends_key_and_count(server: _Server, base: str) -> None:
    config = {
        "provider": "brave",
        "brave_api_key_env": "MY_BRAVE_KEY",
        "brave_base_url": base + "/brave",
    }
    result = await web_search("rust async", 3, config=config, env={"MY_BRAVE_KEY": "test-key"})
    assert result.success is True, result.error
    assert result.data == [
        {"title": "Brave & Co", "url": "https://b.example/", "snippet": "a bold claim"}
    ]
    request = server.log[-1]
    assert request["path"] == "/brave/web/search"
    assert request["query"] == {"q": ["rust async"], "count": ["3"]}
    assert request["headers"].get("X-Subscription-Token") == "test-key"


@pytest.mark.asyncio
async def test_brave_wrong_key_is_reported(base: str) -> None:
    config = {"provider": "brave", "brave_base_url": base + "/brave"}
    result = await web_search("q", 3, config=config, env={"BRAVE_API_KEY": "wrong"})
    assert result.success is False
    assert "brave search failed with HTTP 401" in (result.error or "")
    assert "check the Brave API key" in (result.error or "")


@pytest.mark.asyncio
async def test_tavily_search(server: _Server, base: str) -> None:
    config = {"provider": "tavily", "tavily_base_url": base + "/tavily"}
    result = await web_search("tavily q", 4, config=config, env={"TAVILY_API_KEY": "tv-key"})
    assert result.success is True, result.error
    assert result.data == [{"title": "T1", "url": "https://t.example/1", "snippet": "tavily q"}]
    assert json.loads(server.log[-1]["body"]) == {"query": "tavily q", "max_results": 4}


@pytest.mark.asyncio
async def test_missing_api_key_names_the_variable() -> None:
    config = {"provider": "brave", "brave_api_key_env": "MY_BRAVE_KEY"}
    result = await web_search("q", 3, config=config, env={})
    assert result.success is False
    assert "MY_BRAVE_KEY" in (result.error or "")
    assert "set the environment variable" in (result.error or "")
    with pytest.raises(SearchConfigError, match="BRAVE_API_KEY"):
        make_provider({"provider": "brave"}, {})


@pytest.mark.asyncio
async def test_unknown_or_missing_provider() -> None:
    result = await web_search("q", 3, config={"provider": "bing"}, env={})
    assert result.success is False
    assert "unknown web search provider 'bing'" in (result.error or "")
    assert "'searxng', 'brave', 'tavily'" in (result.error or "")
    result = await web_search("q", 3, config={}, env={})
    assert "web search is not configured" in (result.error or "")
    assert "web.search.provider" in (result.error or "")
    result = await web_search("q", 3, config={"provider": "searxng"}, env={})
    assert "web.search.searxng_url" in (result.error or "")
    assert isinstance(
        make_provider({"provider": "SearXNG", "searxng_url": "http://s:8888"}, {}), SearxngProvider
    )


@pytest.mark.asyncio
async def test_provider_http_error(base: str) -> None:
    result = await web_search("q", 3, config=searx_config(base, "/broken"), env={})
    assert result.success is False
    assert "searxng search failed with HTTP 500" in (result.error or "")
    assert result.metadata == {"provider": "searxng"}


@pytest.mark.asyncio
async def test_provider_malformed_json(base: str) -> None:
    result = await web_search("q", 3, config=searx_config(base, "/malformed"), env={})
    assert result.success is False
    assert "searxng returned a response that is not valid JSON" in (result.error or "")


@pytest.mark.asyncio
async def test_provider_timeout(base: str) -> None:
    config = {**searx_config(base, "/slowsearch"), "timeout": 0.3}
    result = await web_search("q", 3, config=config, env={})
    assert result.success is False
    assert "searxng search timed out" in (result.error or "")


@pytest.mark.asyncio
async def test_provider_unreachable() -> None:
    with socket.socket() as sock:  # a port that nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = await web_search("q", 3, config=searx_config(f"http://127.0.0.1:{port}"), env={})
    assert result.success is False
    assert "searxng search request failed: ConnectError" in (result.error or "")


@pytest.mark.parametrize(
    "query, count, message",
    [
        ("", 5, "query must be a non-empty string"),
        ("   ", 5, "query must be a non-empty string"),
        ("q", 0, "count must be an integer from 1 to 20"),
        ("q", 21, "count must be an integer from 1 to 20"),
    ],
)
@pytest.mark.asyncio
async def test_search_input_validation(query: str, count: int, message: str) -> None:
    result = await web_search(query, count, config={"provider": "searxng"}, env={})
    assert result.success is False
    assert message in (result.error or "")
