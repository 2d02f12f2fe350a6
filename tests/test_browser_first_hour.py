"""The page shows work where people look (issue 38), through `artifactflow demo`.

The real console script serves the page with its scripted model (offline, no key); Debian's
Chromium, driven by Playwright, asks a question at 1280 px and at 390 px. While the run works
the answer's bubble names the current step (a subagent, a tool), streamed text arrives as
Markdown with its line breaks, the timeline widens to full height, a phone's view stays where
the person is, and no request leaves this machine.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from browser_helpers import chromium_page, require_chromium
from waiting import ceiling, wait_until

ARTIFACTFLOW = str(Path(sys.executable).parent / "artifactflow")
ROOT = Path(__file__).resolve().parent.parent

# Everything the answer's bubble and status line showed while the run worked.
WATCH = """(() => {
  window.__seen = []; window.__maxScroll = 0;
  const note = () => {
    const turn = document.querySelector('.turn:last-child');
    if (!turn) return;
    const bubble = turn.querySelector('.bubble.assistant');
    window.__seen.push({
      status: turn.querySelector('.status-line')?.textContent || '',
      running: bubble?.classList.contains('cursor') || false,
      html: bubble?.innerHTML || '',
    });
  };
  new MutationObserver(note).observe(document.body, {subtree: true, childList: true, characterData: true});
  addEventListener('scroll', () => { window.__maxScroll = Math.max(window.__maxScroll, scrollY); });
})()"""
DONE = """(() => { const b = document.querySelector('.turn:last-child .bubble.assistant');
  return b && !b.classList.contains('cursor') && b.querySelector('h2'); })()"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


async def _ask(page: Any, question: str) -> list[dict[str, Any]]:
    await page.evaluate(WATCH)
    await page.fill("#input", question)
    await page.press("#input", "Enter")
    await page.wait_for_function(DONE, timeout=180_000)
    return await page.evaluate("window.__seen")


async def test_demo_serves_the_page_offline_with_progress_in_the_bubble(tmp_path: Path) -> None:
    require_chromium()
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARTIFACTFLOW_", "OPENAI_"))}
    server = subprocess.Popen(  # noqa: ASYNC220 - started once, read after it ends
        [ARTIFACTFLOW, "demo", "--port", str(port), "--data-dir", str(tmp_path / "data"),
         "--config-dir", str(ROOT / "config")],
        env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        await wait_until(lambda: _listening(port) or server.poll() is not None, timeout=180,
                         what="artifactflow demo to listen")
        assert server.poll() is None, server.stdout.read() if server.stdout else ""
        base = f"http://127.0.0.1:{port}"
        async with chromium_page() as (page, errors):
            requested: list[str] = []
            page.on("request", lambda request: requested.append(request.url))
            await page.set_viewport_size({"width": 1280, "height": 860})
            await page.goto(base)
            seen = await _ask(page, "How do SQLite and PostgreSQL handle concurrent writers?")

            statuses = [s["status"] for s in seen if s["running"]]
            assert any(s.startswith("Asking search_agent: Research: How do SQLite") for s in statuses), statuses
            assert any("running create_artifact…" in s for s in statuses), statuses
            # streamed text shown as Markdown (a heading, a list) before the run ended
            assert any(s["running"] and "<h2" in s["html"] for s in seen)
            assert any(s["running"] and "<li" in s["html"] for s in seen)
            bubble = page.locator(".turn:last-child .bubble.assistant")
            assert await bubble.locator("ol li").count() == 2
            assert "demo" in (await bubble.inner_text())
            await page.locator("#artifacts li", has_text="Demo notes").wait_for()
            timeline = await page.text_content("#timeline") or ""
            assert "search_agent" in timeline and "create_artifact" in timeline

            # the timeline widens to full height, and back
            narrow = (await page.locator(".side").bounding_box() or {})["width"]
            await page.click("#timeline-widen")
            wide_box = await page.locator(".side").bounding_box() or {}
            assert wide_box["width"] > narrow + 150
            panel = await page.locator(".side .panel").first.bounding_box() or {}
            assert panel["height"] > 600  # full height: the artifacts panel gives way
            assert await page.locator("#artifacts").is_hidden()
            await page.click("#timeline-widen")
            assert await page.locator("#artifacts").is_visible()

            # a phone: the view stays where the person is while the run works
            await page.set_viewport_size({"width": 390, "height": 844})
            await page.reload()
            await page.locator(".turn").first.wait_for()
            await page.evaluate("window.scrollTo(0, 0)")
            await _ask(page, "And what about MySQL?")
            assert await page.evaluate("window.__maxScroll") == 0
            assert await page.evaluate("scrollY") == 0
            assert await page.locator(".topbar").is_visible()

            # the API documentation too, then: nothing was asked of another host
            await page.goto(f"{base}/redoc")
            await page.locator("h1", has_text="artifactflow").first.wait_for(timeout=120_000)
            await page.locator("text=Redocly").first.wait_for(state="attached", timeout=120_000)
            await page.goto(f"{base}/docs")
            await page.locator(".swagger-ui").first.wait_for(timeout=120_000)
            await asyncio.sleep(0)  # let the last request events arrive
            hosts = {urlparse(url).hostname for url in requested if url.startswith("http")}
            assert hosts == {"127.0.0.1"}, sorted(set(requested))
            assert errors == []
    finally:
        server.terminate()
        try:
            server.wait(timeout=ceiling(120))
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
