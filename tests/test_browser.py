"""The web page end to end: real server, real browser (Debian's chromium via Playwright).

One conversation exercises the page's hard parts: the streamed answer, the permission dialog
(also after a reload while paused), a reload in the middle of a run (the page re-attaches with
the events it missed, without duplicates), and the artifact panel.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from browser_helpers import chromium_page, require_chromium, serving
from scripted_llm import Call, Text, ToolCalls

from artifactflow.api.app import create_app

SCREENSHOT = "/tmp/af_page.png"
DIALOG_SCREENSHOT = "/tmp/af_dialog.png"
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
            timeout=15000,
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
                timeout=20000,
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
