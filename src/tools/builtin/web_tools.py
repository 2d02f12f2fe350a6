"""`web_fetch` and `web_search` as tools, configured from settings (`web:` section)."""

from __future__ import annotations

import os
from typing import Annotated

from pydantic import Field, StringConstraints

from ..base import Permission, ToolResult
from ..context import ToolContext
from ..decorator import tool
from ..web import fetch_urls
from ..web import web_search as run_search
from ..web.fetch import MAX_URLS

# Declared checks (in the schema the model sees, and run before a person is asked to approve a
# call): a call with no URL or an empty one goes back to the model, never to a person.
Url = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Urls = Annotated[list[Url], Field(min_length=1, max_length=MAX_URLS)]
Query = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


@tool(name="web_fetch", permission=Permission.CONFIRM)
async def web_fetch(
    ctx: ToolContext, url_list: Urls, max_content_length: Annotated[int, Field(gt=0)] = 20000
) -> ToolResult:
    """Fetch web pages or PDFs and return their readable text as Markdown, one entry per URL.

    Args:
        url_list: The http(s) URLs to fetch (at most 20); they are fetched concurrently.
        max_content_length: Maximum characters of content kept per URL; longer pages are truncated.
    """
    settings = ctx.service("settings")
    return await fetch_urls(
        url_list,
        max_content_length,
        allow_private_networks=settings.web.allow_private_networks,
        timeout=settings.web.fetch_timeout,
    )


@tool(name="web_search")
async def web_search(
    ctx: ToolContext, query: Query, count: Annotated[int, Field(ge=1, le=20)] = 5
) -> ToolResult:
    """Search the web and return result titles, URLs and snippets.

    Args:
        query: The search query.
        count: How many results to return (1-20).
    """
    settings = ctx.service("settings")
    return await run_search(query, count, config=settings.web.search.model_dump(), env=os.environ)


WEB_TOOLS = [web_fetch, web_search]
