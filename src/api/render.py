"""Markdown to safe HTML for the web page: answers and artifacts are rendered here, on the
server, by maintained packages instead of a hand-written renderer in the page.

- `markdown-it-py` parses CommonMark (plus tables and strikethrough); raw HTML in the text is
  passed through to the sanitiser rather than escaped, so harmless tags a model writes
  (`<details>`, `<sub>`, `<br>`) still work.
- `pygments` highlights fenced code blocks (classes only; the colours are `/highlight.css`).
- `nh3` (ammonia) sanitises the result last, so nothing the model or a tool wrote can run
  script in the page: `<script>`, event-handler attributes and `javascript:` links are dropped
  whatever the parser let through.
"""

from __future__ import annotations

from functools import lru_cache
from html import escape

import nh3
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

CODE_SCOPE = ".md"  # the page's container class for rendered Markdown
_FORMATTER = HtmlFormatter(nowrap=True)

# Tags and attributes beyond nh3's defaults: highlighted code carries classes on its spans.
_ATTRIBUTES: dict[str, set[str]] = {
    **{tag: set(attrs) for tag, attrs in nh3.ALLOWED_ATTRIBUTES.items()},
    "span": {"class"},
    "code": {"class"},
    "pre": {"class"},
    "th": {"align", "style"},
    "td": {"align", "style"},
}


def _highlight(code: str, lang: str, _attrs: str) -> str:
    """Spans for a fenced block with a known language; markdown-it wraps them in
    `<pre><code class="language-…">`. An unknown or missing language stays plain (escaped)."""
    if lang:
        try:
            return highlight(code, get_lexer_by_name(lang), _FORMATTER)
        except ClassNotFound:
            pass
    return escape(code)


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": True, "highlight": _highlight}).enable(
        ["table", "strikethrough"]
    )


def render_markdown(text: str) -> str:
    """Sanitised HTML for Markdown `text`."""
    html = _parser().render(text)
    return nh3.clean(
        html,
        attributes=_ATTRIBUTES,
        filter_style_properties={"text-align"},
        link_rel="noopener noreferrer nofollow",
    )


@lru_cache(maxsize=1)
def highlight_css() -> str:
    """The colours of highlighted code, scoped to rendered Markdown."""
    return "\n".join(_FORMATTER.get_token_style_defs(CODE_SCOPE)) + "\n"


__all__ = ["highlight_css", "render_markdown"]
