"""The web page end to end: real server, real browser (Debian's chromium via Playwright).

One conversation exercises the page's hard parts: the streamed answer, the permission dialog
(also after a reload while paused), a reload in the middle of a run (the page re-attaches with
the events it missed, without duplicates), and the artifact panel.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

from browser_helpers import chromium_page, require_chromium, serving
from scripted_llm import Call, Error, Text, ToolCalls
from waiting import ceiling

from artifactflow import tool
from artifactflow.api.app import create_app

SCREENSHOT = "/tmp/af_page.png"
DIALOG_SCREENSHOT = "/tmp/af_dialog.png"
PHONE_SCREENSHOT = "/tmp/af_phone.png"
TIMELINE_SCREENSHOT = "/tmp/af_timeline.png"
ANSWER = (
    "The report is ready: see **Quarterly report** in the artifact panel. "
    + "It covers revenue, costs and outlook. " * 3
)
# The final answer is being written: the lead's second round started and the run goes on.
STREAMING = (
    "document.querySelectorAll('#timeline li[data-type=agent_start]').length >= 2"
    " && document.querySelector('.turn:last-child .bubble.assistant').classList.contains('cursor')"
)
CONFIG = """\
permissions:
  create_artifact: confirm
server:
  heartbeat_seconds: 1
"""


async def test_chat_permission_reload_and_artifact(make_client: Any, llm: Any) -> None:
    require_chromium()
    client = await make_client(
        lead_tools=["create_artifact", "update_artifact"], yaml_text=CONFIG
    )
    llm.script(
        ToolCalls(
            [
                Call(
                    "create_artifact",
                    {
                        "id": "report",
                        "title": "Quarterly report",
                        "content": "# Q3\n\nRevenue grew 12%.\n",
                    },
                    id="call_1",
                )
            ],
            content="I'll draft the report first.",
        ),
        Text(ANSWER, chunk_size=4, chunk_delay=0.04),  # ~2.5 s: slow enough to reload mid-run
    )
    app = create_app(client=client)
    async with serving(app) as base, chromium_page() as (page, errors):
        await page.goto(base)
        await page.fill("#input", "Write the quarterly report")
        await page.press("#input", "Enter")

        dialog = page.locator("#permission-dialog")
        await dialog.wait_for(state="visible")
        assert "create_artifact" in await dialog.inner_text()
        assert "#c=" in page.url  # the conversation survives a reload

        await page.reload()  # paused: the dialog must come back from the message's waiting_for
        await dialog.wait_for(state="visible")
        assert "Revenue grew" in await dialog.inner_text()
        await page.screenshot(path=DIALOG_SCREENSHOT)
        await page.click("#permission-submit")
        await dialog.wait_for(state="hidden")

        answer = page.locator(".turn .bubble.assistant").last
        await page.wait_for_function(STREAMING)
        await page.reload()  # mid-run: re-attach, replay what was missed, continue live

        await page.wait_for_function(
            "(() => { const b = document.querySelector('.turn:last-child .bubble.assistant');"
            " return b && !b.classList.contains('cursor') && b.textContent.includes('outlook'); })()",
            timeout=ceiling(120) * 1000,
        )
        text = await answer.inner_text()
        assert "The report is ready" in text and "Quarterly report" in text
        assert "**" not in text  # rendered as Markdown

        await page.locator("#artifacts li.item").first.wait_for()
        assert "Quarterly report" in await page.inner_text("#artifacts")
        await page.wait_for_function(
            "document.querySelector('#artifact-content').textContent.includes('Revenue grew')"
        )

        timeline = page.locator("#timeline li")
        types = [await item.get_attribute("data-type") for item in await timeline.all()]
        assert types.count("complete") == 1 and types.count("permission_result") == 1
        assert types.count("metadata") == 1  # replay + live overlap is deduplicated
        assert await page.inner_text("#connection") == "idle"
        await page.screenshot(path=SCREENSHOT)
        assert errors == []

    message = (
        await client.admin.store.list_messages(
            (await client.conversations.list())[0]["id"]
        )
    )[0]
    assert message["status"] == "completed" and message["response"] == ANSWER


async def test_token_prompt_and_branch_navigation(make_client: Any, llm: Any) -> None:
    require_chromium()
    client = await make_client(yaml_text="auth:\n  enabled: true\n")
    _, token = await client.admin.create_token("alice")
    llm.script(Text("first answer"), Text("second answer"), Text("edited answer"))
    app = create_app(client=client)
    last_answer = (
        "document.querySelector('.turn:last-child .bubble.assistant')?.textContent.includes('{}')"
    )
    async with serving(app) as base, chromium_page() as (page, errors):
        await page.goto(base)
        token_dialog = page.locator("#token-dialog")
        await token_dialog.wait_for(state="visible")  # the API answered 401
        await page.fill("#token-input", token)
        await page.click("#token-form button[type=submit]")
        await token_dialog.wait_for(state="hidden")

        for question, answer in [
            ("first question", "first answer"),
            ("second question", "second answer"),
        ]:
            await page.fill("#input", question)
            await page.press("#input", "Enter")
            await page.wait_for_function(last_answer.format(answer))

        # edit the second question: a new branch after the first answer
        second = page.locator(".turn").nth(1)
        await second.locator("button.edit").click()
        await second.locator(".edit-box textarea").fill("second question, edited")
        await second.locator(".edit-box button.save").click()
        await page.wait_for_function(last_answer.format("edited answer"))
        assert [m["content"] for m in llm.requests[2]["messages"][1:]] == [
            "first question",
            "first answer",
            "second question, edited",
        ]
        nav = page.locator(".turn").nth(1).locator(".branch-nav")
        assert "2/2" in await nav.inner_text()
        await nav.locator("button.prev").click()
        await page.wait_for_function(last_answer.format("second answer"))
        assert "1/2" in await page.locator(".turn").nth(1).locator(".branch-nav").inner_text()
        await page.locator(".turn").nth(1).locator(".branch-nav button.next").click()
        await page.wait_for_function(last_answer.format("edited answer"))

        await page.reload()  # the token is remembered; the conversation reopens
        await page.wait_for_function(last_answer.format("edited answer"))
        assert not await token_dialog.is_visible()
        assert await page.locator(".turn").count() == 2
        assert errors == []


async def test_page_reconnects_after_a_server_restart(make_client: Any, llm: Any) -> None:
    """The server goes away mid-run (the run itself goes on in this process) and comes back on
    the same port: the page reconnects by itself and shows every event exactly once."""
    require_chromium()
    client = await make_client(lead_tools=["create_artifact"])
    llm.script(
        ToolCalls([Call("create_artifact", {"id": "a", "title": "Notes", "content": "n"})]),
        Text(ANSWER, chunk_size=3, chunk_delay=0.05),  # ~3 s
    )
    app = create_app(client=client)
    async with chromium_page() as (page, errors):
        async with serving(app) as base:
            await page.goto(base)
            await page.fill("#input", "Take notes")
            await page.press("#input", "Enter")
            await page.wait_for_function(STREAMING)
        # the server is down now; the run goes on
        await page.wait_for_function(
            "document.querySelector('#connection').classList.contains('reconnecting')"
        )
        port = int(base.rsplit(":", 1)[1])
        async with serving(app, port):
            await page.wait_for_function(
                "(() => { const b = document.querySelector('.turn:last-child .bubble.assistant');"
                " return b && !b.classList.contains('cursor') && b.textContent.includes('outlook'); })()",
                timeout=ceiling(120) * 1000,
            )
            types = [
                await item.get_attribute("data-type")
                for item in await page.locator("#timeline li").all()
            ]
            message_id = await page.get_attribute(".turn:last-child", "data-id")
            stored = [e.type for e in await client.runs.events(message_id)]
            # one line per stored event (a tool call's line shows its start, then its result)
            shown = [t for t in stored if t not in ("agent_complete", "tool_start")]
            assert Counter(types) == Counter(shown)  # nothing lost, nothing repeated
            assert "Notes" in await page.inner_text("#artifacts")
            assert errors == []


async def test_edit_and_deny_in_the_dialog_diff_export_stop_delete(
    make_client: Any, llm: Any, tmp_path: Any
) -> None:
    require_chromium()
    client = await make_client(
        lead_tools=["create_artifact", "update_artifact"],
        yaml_text="permissions:\n  update_artifact: confirm\n",
    )
    update = {"id": "report", "old_str": "line one", "new_str": "line two"}
    llm.script(
        ToolCalls(
            [Call("create_artifact", {"id": "report", "title": "Report", "content": "line one\n"})]
        ),
        ToolCalls([Call("update_artifact", update, id="u1")]),
        Text("Updated."),
        ToolCalls([Call("update_artifact", update, id="u2")]),
        Text("Left as it is."),
        Text("a long answer " * 100, chunk_size=4, chunk_delay=0.05),
    )
    app = create_app(client=client)
    async with serving(app) as base, chromium_page() as (page, errors):
        await page.goto(base)
        dialog = page.locator("#permission-dialog")
        last = page.locator(".turn").last

        # edit the arguments: the tool runs with what the person wrote
        await page.fill("#input", "update the report")
        await page.press("#input", "Enter")
        call = dialog.locator(".call[data-call-id=u1]")
        await call.wait_for()
        await call.locator("input[value=edit]").check()
        await call.locator(".edit-args").fill("{not json")
        await page.click("#permission-submit")
        assert "not valid JSON" in await page.inner_text("#permission-error")
        edited = dict(update, new_str="line three")
        await call.locator(".edit-args").fill(json.dumps(edited))
        await page.click("#permission-submit")
        await dialog.wait_for(state="hidden")
        await last.locator(".bubble.assistant", has_text="Updated.").wait_for()
        decided = page.locator("#timeline li[data-type=permission_result]")
        assert "edit" in await decided.inner_text()
        assert "line three" in (await decided.text_content() or "")  # the new arguments

        # the artifact panel: version 2 holds the edit; a diff against version 1
        await page.wait_for_function(
            "document.querySelector('#artifact-content').textContent.includes('line three')"
        )
        added = page.locator("#artifact-content .diff-add", has_text="+line three")
        for _ in range(5):  # a late artifact reload may still re-render the panel: choose again
            await page.select_option("#artifact-diff-from", "1")
            try:
                await added.wait_for(timeout=5000)
                break
            except Exception:
                continue
        await added.wait_for()
        assert await page.inner_text("#artifact-content .diff-del") == "-line one"
        async with page.expect_download() as info:
            await page.click("#artifact-export")
        download = await info.value
        assert download.suggested_filename == "report.md"
        await download.save_as(tmp_path / "report.md")
        assert "line three" in (tmp_path / "report.md").read_text()

        # deny with a reason: the model is told why
        await page.fill("#input", "change it again")
        await page.press("#input", "Enter")
        call = dialog.locator(".call[data-call-id=u2]")
        await call.wait_for()
        await call.locator("input[value=deny]").check()
        await call.locator(".reason").fill("not now")
        await page.click("#permission-submit")
        await last.locator(".bubble.assistant", has_text="Left as it is.").wait_for()
        decided = page.locator("#timeline li[data-type=permission_result]")
        assert "deny" in await decided.inner_text() and "not now" in await decided.inner_text()
        denied = [m for m in llm.requests[4]["messages"] if m["role"] == "tool"][-1]["content"]
        assert "not now" in denied

        # stop a running answer
        await page.fill("#input", "write a lot")
        await page.press("#input", "Enter")
        await last.locator(".bubble.assistant", has_text="a long answer").wait_for()
        await page.click("#stop")
        await last.locator(".status-line", has_text="Stopped").wait_for()
        assert await page.locator("#stop").is_hidden()

        # delete the conversation
        page.on("dialog", lambda confirm: confirm.accept())
        item = page.locator("#conversations li").first
        await item.hover()
        await item.locator(".delete").click()
        await page.locator("#conversations li").first.wait_for(state="detached")
        assert await page.locator(".turn").count() == 0
        assert errors == []
    assert await client.conversations.list() == []


@tool
async def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: Which city.
    """
    return f"{city}: 3°C"


PHONE_OVERFLOW = """(() => {
  const wide = (e) => e.scrollWidth > e.clientWidth;
  const boxes = [document.documentElement, document.body, ...document.querySelectorAll(
    ".messages, .sidebar, .side, .composer, .panel")];
  const out = boxes.filter(wide).map((e) => e.className || e.tagName);
  for (const e of document.querySelectorAll(".bubble, .turn, #timeline li"))
    if (e.getBoundingClientRect().right > innerWidth) out.push(e.className || e.tagName);
  return out;
})()"""
SUB_ANSWER = "Rain tomorrow, then snow. " + "Details of the forecast follow. " * 8
TASK = "Check the weather in Oslo. Then ask the researcher and answer in Markdown."
MARKDOWN_ANSWER = (
    "It is **cold** in Oslo.\n\n```python\nprint('wear a coat')\n```\n\n"
    '<img src="x" onerror="window.__xss = 1"><script>window.__xss = 2</script>'
)
DONE = (
    "(() => {{ const b = document.querySelector('.turn:last-child .bubble.assistant');"
    " return b && !b.classList.contains('cursor') && b.querySelector('{}'); }})()"
)


async def test_timeline_details_markdown_retry_phone_and_offline_docs(
    make_client: Any, llm: Any
) -> None:
    require_chromium()
    client = await make_client(
        extra_tools=[weather],
        lead_tools=["weather", "call_subagent"],
        subagents={"researcher": []},
    )
    llm.script(
        ToolCalls([Call("weather", {"city": "Oslo"}, id="w1")]),
        ToolCalls(
            [
                Call(
                    "call_subagent",
                    {"agent_name": "researcher", "instruction": "Find the forecast"},
                )
            ]
        ),
        Text(SUB_ANSWER),  # the subagent's answer
        Text(MARKDOWN_ANSWER),
        Error(400, "the model refused"),  # the second message fails…
        Text("second try worked"),  # …and its retry answers
    )
    app = create_app(client=client)
    async with serving(app) as base, chromium_page() as (page, errors):
        await page.goto(base)
        await page.fill("#input", TASK)
        await page.press("#input", "Enter")
        await page.wait_for_function(DONE.format("strong"))

        # the timeline: the tool's arguments and result, the subagent's task and answer
        await page.screenshot(path=TIMELINE_SCREENSHOT)
        timeline = await page.text_content("#timeline") or ""
        assert '"city":"Oslo"' in timeline and "Oslo: 3°C" in timeline
        assert "Find the forecast" in timeline and SUB_ANSWER.strip() in timeline
        answer = page.locator("#timeline li[data-type=subagent_complete] details")
        assert not await answer.locator("pre").is_visible()  # long: collapsed…
        await answer.locator("summary").click()  # …one click away
        assert (await answer.locator("pre").inner_text()).strip() == SUB_ANSWER.strip()

        # Markdown rendered by the server: bold, highlighted code, the payload sanitised
        bubble = page.locator(".turn:last-child .bubble.assistant")
        assert await bubble.locator("strong").inner_text() == "cold"
        assert "wear a coat" in await bubble.locator("pre code").inner_text()
        assert await bubble.locator("pre code span").count() > 0  # highlighted
        html = await bubble.inner_html()
        assert "onerror" not in html and "<script" not in html
        assert await page.evaluate("window.__xss") is None

        # the title is the task's first sentence
        await page.locator("#conversations li .title", has_text="Check the weather").wait_for()
        assert await page.inner_text("#conversations li .title") == "Check the weather in Oslo"

        # a failed run offers Retry, and the retry runs as a new branch
        await page.fill("#input", "again")
        await page.press("#input", "Enter")
        retry = page.locator(".turn:last-child .status-line button.retry")
        await retry.wait_for()
        # the reason follows the status (the error event may land a moment after it)
        await page.locator(".turn:last-child .status-line", has_text="the model refused").wait_for()
        error = page.locator("#timeline li[data-type=error]")
        assert "the model refused" in await error.inner_text()  # the timeline says why
        await retry.click()
        await page.locator(
            ".turn:last-child .bubble.assistant", has_text="second try worked"
        ).wait_for()
        assert "2/2" in await page.inner_text(".turn:last-child .branch-nav")
        assert [m["content"] for m in llm.requests[-1]["messages"][1:]][-1] == "again"

        # a phone: nothing scrolls sideways
        await page.set_viewport_size({"width": 390, "height": 844})
        await page.reload()
        await page.wait_for_function(DONE.format("p"))
        await page.locator(".turn").first.locator(".bubble.assistant").click()  # its timeline
        await page.locator("#timeline li[data-type=subagent_complete] summary").click()
        await page.screenshot(path=PHONE_SCREENSHOT, full_page=True)
        # neither the page nor a panel scrolls sideways, and every bubble fits the screen
        overflowing = await page.evaluate(PHONE_OVERFLOW)
        assert overflowing == [], overflowing
        assert errors == []

        # /docs works offline: Swagger UI from this server only, and it renders the schema
        requested: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        await page.goto(f"{base}/docs")
        await page.locator(".swagger-ui .info .title").wait_for()
        assert requested and all(url.startswith(base) for url in requested), requested
        docs_html = await (await page.request.get(f"{base}/docs")).text()
        for url in re.findall(r"""(?:src|href|url)\s*[=:]\s*['"]([^'"]+)""", docs_html):
            assert url.startswith("/"), url
        favicon = await page.request.get(f"{base}/favicon.ico")
        assert favicon.status == 200 and "svg" in favicon.headers["content-type"]
        assert errors == []
