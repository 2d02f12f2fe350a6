"""The page's memory panel and recall in the timeline, in headless Chromium against a real
server: the panel lists the user's memories, searches them (saying which mode ran) and forgets
one; a message whose run recalled memories shows them in its timeline (`memory_recalled`)."""

from __future__ import annotations

from typing import Any

from browser_helpers import chromium_page, require_chromium, serving
from scripted_llm import Text

from artifactflow.api.app import create_app
from artifactflow.memory import LOCAL_USER
from artifactflow.memory.recall import memory_store

SCREENSHOT = "/tmp/af_memory_panel.png"
TEAL = "The user's favourite colour for all designs is teal."
PORT = "The staging database listens on port 6543 behind the VPN."


async def test_memory_panel_and_recall_in_the_timeline(make_client: Any, llm: Any) -> None:
    require_chromium()
    client = await make_client(yaml_text="memory:\n  recall: true\n")
    memory = memory_store(client.admin.services)
    teal = await memory.add_memory((LOCAL_USER, "global"), TEAL)
    port = await memory.add_memory((LOCAL_USER, "project", "ops"), PORT)
    llm.script(Text("Use teal for the logo."))
    async with serving(create_app(client=client)) as base, chromium_page() as (page, errors):
        await page.goto(base)
        panel = page.locator("#memories")
        await page.wait_for_function("document.querySelectorAll('#memories li.memory').length === 2")
        assert "project ops" in await panel.inner_text()

        await page.fill("#input", "Which colour should the new logo use for our designs?")
        await page.press("#input", "Enter")
        recalled = page.locator("#timeline li[data-type=memory_recalled]")
        await recalled.wait_for()
        text = await recalled.inner_text()
        assert "1 memory" in text and "standard" in text and "hybrid" in text and "teal" in text
        assert "6543" not in text
        await page.wait_for_function(
            "document.querySelector('#timeline li[data-type=complete]') !== null"
        )

        await page.fill("#memory-query", "staging database port")
        await page.click("#memory-search button[type=submit]")
        await page.wait_for_function("document.querySelector('#memory-note').textContent.includes('search ran as')")
        first = page.locator("#memories li.memory").first
        assert await first.get_attribute("data-id") == port.id
        await first.locator(".forget").click()
        await page.wait_for_function(
            f"!document.querySelector('#memories li[data-id=\"{port.id}\"]')"
        )
        await page.click("#memory-clear")
        await page.wait_for_function("document.querySelectorAll('#memories li.memory').length === 1")
        assert await page.locator("#memories li.memory").first.get_attribute("data-id") == teal.id
        await page.screenshot(path=SCREENSHOT, full_page=True)
        assert errors == []
    assert await memory.get_memory(None, port.id) is None
