"""Readable text from what `fetch_urls` downloaded: HTML to Markdown, PDF to text.

The model's context is precious and navigation menus are noise, so HTML loses its
boilerplate (scripts, styles, navigation, page header and footer, forms, asides) before it
is turned into Markdown, and keeps only its main content when the page marks one. Links are
made absolute because the model cannot resolve relative ones. PDF extraction stops once the
text is longer than what would be kept anyway (long PDFs are slow to parse). Both are pure
functions of the bytes, run by the fetcher in a worker thread.
"""

from __future__ import annotations

import io
import re
from typing import Any
from urllib.parse import urljoin

# Elements that never carry the page's readable content.
DROP_TAGS = (
    "script",
    "style",
    "noscript",
    "nav",
    "aside",
    "form",
    "template",
    "svg",
    "iframe",
    "object",
    "embed",
    "canvas",
    "button",
    "select",
    "input",
    "textarea",
    "dialog",
    "link",
    "meta",
)
# Page chrome: dropped at page level, kept inside an article (an article's own <header>
# usually holds its title and byline).
CHROME_TAGS = ("header", "footer")
CHROME_ROLES = ("navigation", "banner", "contentinfo", "complementary", "search", "menu")


class FetchError(Exception):
    """A per-URL failure with a message meant for the model."""


def html_to_markdown(html: str, base_url: str | None = None) -> tuple[str | None, str]:
    """Readable Markdown for an HTML document: ``(title, markdown)``.

    Boilerplate is removed first, relative links are made absolute (the model cannot
    resolve them), and when the page marks its main content (``<main>``, or a single
    ``<article>``) holding most of the text, only that part is converted.
    """
    from bs4 import BeautifulSoup, Comment
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    title = _html_title(soup)
    base = base_url
    base_tag = soup.find("base", href=True)
    if base_tag is not None:
        base = urljoin(base_url or "", str(base_tag.get("href", "")).strip())

    for tag in soup.find_all(DROP_TAGS):
        if not tag.decomposed:
            tag.decompose()
    for comment in soup.find_all(string=lambda s: isinstance(s, Comment)):
        comment.extract()
    for tag in soup.find_all(CHROME_TAGS):
        if not tag.decomposed and tag.find_parent(["article", "main", "section"]) is None:
            tag.decompose()
    for tag in soup.find_all(None, {"role": list(CHROME_ROLES)}):
        if not tag.decomposed:
            tag.decompose()
    for tag in soup.find_all(None, {"aria-hidden": "true"}):
        if not tag.decomposed:
            tag.decompose()
    for tag in soup.find_all(None, {"hidden": True}):
        if not tag.decomposed:
            tag.decompose()
    if soup.head is not None:
        soup.head.decompose()

    for a in soup.find_all("a"):
        href = str(a.get("href") or "").strip()
        if not href or href.lower().startswith(("javascript:", "vbscript:", "data:")):
            a.unwrap()
        elif base:
            a["href"] = urljoin(base, href)
    for img in soup.find_all("img"):
        src = str(img.get("src") or "").strip()
        if not src or src.lower().startswith("data:"):
            img.decompose()
        elif base:
            img["src"] = urljoin(base, src)

    root: Any = soup.body or soup
    articles = soup.find_all("article")
    candidate = soup.find("main") or (articles[0] if len(articles) == 1 else None)
    if candidate is not None:
        total = len(root.get_text(" ", strip=True))
        if total and len(candidate.get_text(" ", strip=True)) >= 0.3 * total:
            root = candidate

    converter = MarkdownConverter(
        heading_style="ATX",
        bullets="-",
        escape_misc=False,
        escape_underscores=False,
        escape_asterisks=False,
    )
    markdown = converter.convert_soup(root)
    return title, _tidy(markdown)


def pdf_to_text(data: bytes, max_chars: int | None = None) -> tuple[str | None, str, str | None]:
    """Text of a PDF: ``(title, text, note)``.

    Extraction stops after the page that takes the text past `max_chars` (the rest would be
    cut anyway and long PDFs are slow to parse); `note` then says where it stopped.
    """
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                opened = bool(reader.decrypt(""))  # PasswordType.NOT_DECRYPTED is 0
            except Exception:  # e.g. AES without the optional crypto dependency
                opened = False
            if not opened:
                raise FetchError("the PDF is encrypted and cannot be read")
        title = None
        try:
            info = reader.metadata
            if info is not None and info.title:
                title = str(info.title).strip() or None
        except Exception:  # broken metadata must not cost us the text
            title = None
        pages = reader.pages
        count = len(pages)
        parts: list[str] = []
        size = 0
        note = None
        for index, page in enumerate(pages):
            text = (page.extract_text() or "").strip()
            if text:
                parts.append(text)
                size += len(text) + 2
            if max_chars is not None and size > max_chars and index + 1 < count:
                note = f"text extraction stopped after page {index + 1} of {count}"
                break
    except FetchError:
        raise
    except Exception as exc:  # malformed PDFs fail in many ways inside pypdf
        raise FetchError(f"could not read the PDF: {type(exc).__name__}: {exc}") from None
    return title, "\n\n".join(parts), note


def _html_title(soup: Any) -> str | None:
    candidates = []
    if soup.title is not None and soup.title.string:
        candidates.append(soup.title.string)
    og = soup.find("meta", attrs={"property": "og:title"})
    if og is not None and og.get("content"):
        candidates.append(og.get("content"))
    h1 = soup.find("h1")
    if h1 is not None:
        candidates.append(h1.get_text(" ", strip=True))
    for candidate in candidates:
        title = " ".join(str(candidate).split())
        if title:
            return title
    return None


def _tidy(markdown: str) -> str:
    lines = [line.rstrip() for line in markdown.splitlines()]
    text = "\n".join(lines)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()
