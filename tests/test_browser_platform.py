"""The page's assistant picker (issue 35), in a real browser: a saved assistant is offered,
and the message sent with it runs on its model (the scripted OpenAI-compatible server sees it)."""

from __future__ import annotations

from typing import Any

from browser_helpers import chromium_page, require_chromium, serving
from scripted_llm import Text

from artifactflow.api.app import create_app
from artifactflow.client import assistant_rows


async def test_page_sends_with_the_picked_assistant(make_client: Any, llm: Any) -> None:
    require_chromium()
    client = await make_client()
    row = await assistant_rows.create(
        client.admin.store, graph_id=client.admin.services.lead.name,
        config={"configurable": {"model": "model-picked"}}, context={}, metadata={},
        name="Picked", description=None,
    )
    llm.script(Text("Answered by the picked assistant."), Text("Answered by default."))
    async with serving(create_app(client=client)) as base, chromium_page() as (page, errors):
        await page.goto(base)
        picker = page.locator("#assistant")
        await picker.wait_for(state="visible")
        assert "Picked (v1)" in await picker.inner_text()
        await picker.select_option(row.assistant_id)
        await page.fill("#input", "hello")
        await page.press("#input", "Enter")
        await page.locator(".bubble.assistant", has_text="Answered by the picked assistant.").wait_for()
        assert llm.requests[0]["model"] == "model-picked"
        await picker.select_option("")
        await page.fill("#input", "again")
        await page.press("#input", "Enter")
        await page.locator(".bubble.assistant", has_text="Answered by default.").wait_for()
        assert llm.requests[1]["model"] != "model-picked"
        assert errors == []
