"""How artifacts look outside the store: unified diffs and standalone Markdown documents.

Formatting only; `ArtifactService` fetches the versions and calls these.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

MARKDOWN_TYPES = frozenset({"text/markdown", "text/x-markdown", "markdown"})

_FENCE_LANGUAGES = {
    "application/json": "json",
    "application/yaml": "yaml",
    "application/x-yaml": "yaml",
    "text/yaml": "yaml",
    "text/x-yaml": "yaml",
    "text/html": "html",
    "text/css": "css",
    "text/csv": "csv",
    "text/xml": "xml",
    "application/xml": "xml",
    "text/x-python": "python",
    "application/x-python": "python",
    "text/javascript": "javascript",
    "application/javascript": "javascript",
    "application/typescript": "typescript",
    "application/sql": "sql",
    "text/x-sql": "sql",
    "application/toml": "toml",
    "text/x-shellscript": "bash",
}

_NO_NEWLINE = "\\ No newline at end of file\n"


def timestamp(value: float | None) -> str:
    if value is None:
        return "unknown"
    return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _diff_lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines[-1] += "\n" + _NO_NEWLINE  # as `diff -u` and git mark it
    return lines


def fence_language(content_type: str) -> str:
    """The code-fence language for a content type ('' when there is no obvious one)."""
    base = content_type.split(";", 1)[0].strip().lower()
    if base in _FENCE_LANGUAGES:
        return _FENCE_LANGUAGES[base]
    if base.endswith("+json"):
        return "json"
    if base.endswith("+xml"):
        return "xml"
    return ""


def fenced(text: str, language: str = "") -> str:
    """`text` in a code fence longer than any run of backticks inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"{fence}{language}\n{body}{fence}\n"


def unified_diff(old: str, new: str, *, from_label: str, to_label: str, context: int = 3) -> str:
    """A `diff -u` style diff ('' for equal texts), marking a missing final newline."""
    lines = difflib.unified_diff(
        _diff_lines(old), _diff_lines(new), fromfile=from_label, tofile=to_label, n=context
    )
    return "".join(lines)


def markdown_document(art: Mapping[str, Any]) -> str:
    """A standalone Markdown document for one version (`ArtifactService.get`'s dict): `# title`,
    one metadata line, then the content (in a code fence unless it is Markdown)."""
    artifact_id, content_type = art["artifact_id"], art["content_type"]
    meta = (
        f"*`{artifact_id}` · version {art['version']} of {art['current_version']} · "
        f"{content_type} · updated {timestamp(art['updated_at'])}*"
    )
    title = " ".join(art["title"].split()) or artifact_id
    content: str = art["content"]
    if content_type.split(";", 1)[0].strip().lower() in MARKDOWN_TYPES:
        body = content if content.endswith("\n") or not content else content + "\n"
    else:
        body = fenced(content, fence_language(content_type))
    return f"# {title}\n\n{meta}\n\n{body}"
