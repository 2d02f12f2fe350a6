"""Helpers for the browser tests: a real uvicorn server in the test's event loop, and Debian's
chromium driven by Playwright (never `playwright install`)."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from waiting import ceiling, wait_until

from artifactflow.api.app import server_for

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def require_chromium() -> str:
    if not CHROMIUM.exists() and not shutil.which("chromium"):
        reason = "chromium not installed: apt-get install chromium"
        if os.environ.get("CI"):  # in CI a browser test that cannot run is a failure
            pytest.fail(f"{reason} (.ci/run installs it; CI must not skip the browser tests)")
        pytest.skip(reason)
    return str(CHROMIUM if CHROMIUM.exists() else shutil.which("chromium"))


@asynccontextmanager
async def serving(app: Any, port: int = 0) -> AsyncIterator[str]:
    """Serve `app` on 127.0.0.1 (default: a free port) in this event loop; yields the base URL."""
    server = server_for(app, "127.0.0.1", port, log_config=None, log_level="warning")
    task = asyncio.create_task(server.serve())
    try:
        await wait_until(lambda: server.started or task.done(), what="the server")
        if not server.started:
            await task  # re-raise why it did not start
            raise RuntimeError("the server did not start")
        port = server.servers[0].sockets[0].getsockname()[1]
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, ceiling(60))


@asynccontextmanager
async def chromium_page() -> AsyncIterator[tuple[Any, list[str]]]:
    """A fresh headless page; yields it with the list of uncaught page errors."""
    from playwright.async_api import async_playwright

    executable = require_chromium()
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page(viewport={"width": 1360, "height": 860})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            yield page, errors
        finally:
            await browser.close()
