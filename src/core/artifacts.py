"""Artifacts for the CLI and HTTP layers: listing, versions, diffs and Markdown export.

The agents change artifacts through the tools in `artifactflow.tools.builtin.artifacts`; this
module only reads them. Every lookup of something missing raises `NotFoundError` with a message
that says what does exist.
"""

from __future__ import annotations

import asyncio
import difflib
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import NotFoundError

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


def _timestamp(value: float | None) -> str:
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


def _summary(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "artifact_id": row["artifact_id"],
        "title": row["title"],
        "content_type": row["content_type"],
        "version": row["version"],
        "size": len(row["content"]),
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


class ArtifactService:
    """Read-side access to a conversation's artifacts on top of an `AppStore`."""

    def __init__(self, store: Any) -> None:
        self.store = store

    async def list(self, conversation_id: str) -> list[dict[str, Any]]:
        """Summaries (no content): artifact_id, title, content_type, version, size, timestamps."""
        rows = await self.store.list_artifacts(conversation_id)
        return [_summary(row) for row in rows]

    async def _current(self, conversation_id: str, artifact_id: str) -> dict[str, Any]:
        row = await self.store.get_artifact(conversation_id, artifact_id)
        if row is None:
            rows = await self.store.list_artifacts(conversation_id)
            known = ", ".join(r["artifact_id"] for r in rows) or "none"
            raise NotFoundError(
                f"no artifact '{artifact_id}' in conversation '{conversation_id}' "
                f"(artifacts there: {known})"
            )
        return row

    async def get(
        self, conversation_id: str, artifact_id: str, version: int | None = None
    ) -> dict[str, Any]:
        """One artifact at its current version or at `version`, with content.

        Keys: artifact_id, conversation_id, title, content_type, content, version,
        current_version, size, created_at, updated_at (of that version), and for a stored
        version also change, agent and message_id.
        """
        row = await self._current(conversation_id, artifact_id)
        current = row["version"]
        result: dict[str, Any] = {
            "artifact_id": artifact_id,
            "conversation_id": conversation_id,
            "title": row["title"],
            "content_type": row["content_type"],
            "content": row["content"],
            "version": current,
            "current_version": current,
            "size": len(row["content"]),
            "created_at": row["created_at"],
            "updated_at": row["updated_at"],
        }
        if version is None:
            return result
        stored = await self.store.get_artifact_version(conversation_id, artifact_id, version)
        if stored is None:
            raise NotFoundError(
                f"artifact '{artifact_id}' has no version {version} "
                f"(versions 1 to {current} exist)"
            )
        result.update(
            title=stored["title"],
            content=stored["content"],
            version=stored["version"],
            size=len(stored["content"]),
            updated_at=stored["created_at"],
            change=stored["change"],
            agent=stored["agent"],
            message_id=stored["message_id"],
        )
        return result

    async def versions(self, conversation_id: str, artifact_id: str) -> list[dict[str, Any]]:
        """The version history, oldest first (no content): version, title, change, agent,
        message_id, size, created_at."""
        await self._current(conversation_id, artifact_id)
        rows = await self.store.artifact_versions(conversation_id, artifact_id)
        return [
            {
                "version": r["version"],
                "title": r["title"],
                "change": r["change"],
                "agent": r["agent"],
                "message_id": r["message_id"],
                "size": len(r["content"]),
                "created_at": r["created_at"],
            }
            for r in rows
        ]

    async def diff(
        self,
        conversation_id: str,
        artifact_id: str,
        from_version: int,
        to_version: int | None = None,
        *,
        context: int = 3,
    ) -> str:
        """Unified diff from `from_version` to `to_version` (default: current), with the file
        labels `artifact_id@vN`. Empty string when the contents are equal."""
        old = await self.get(conversation_id, artifact_id, from_version)
        new = await self.get(conversation_id, artifact_id, to_version)
        lines = difflib.unified_diff(
            _diff_lines(old["content"]),
            _diff_lines(new["content"]),
            fromfile=f"{artifact_id}@v{old['version']}",
            tofile=f"{artifact_id}@v{new['version']}",
            n=context,
        )
        return "".join(lines)

    async def export_markdown(
        self, conversation_id: str, artifact_id: str, version: int | None = None
    ) -> str:
        """A standalone Markdown document: `# title`, one metadata line, then the content
        (in a code fence unless the content type is Markdown)."""
        art = await self.get(conversation_id, artifact_id, version)
        content_type = art["content_type"]
        meta = (
            f"*`{artifact_id}` · version {art['version']} of {art['current_version']} · "
            f"{content_type} · updated {_timestamp(art['updated_at'])}*"
        )
        title = " ".join(art["title"].split()) or artifact_id
        content: str = art["content"]
        if content_type.split(";", 1)[0].strip().lower() in MARKDOWN_TYPES:
            body = content if content.endswith("\n") or not content else content + "\n"
        else:
            body = fenced(content, fence_language(content_type))
        return f"# {title}\n\n{meta}\n\n{body}"

    async def export_to(
        self,
        path: str | Path,
        conversation_id: str,
        artifact_id: str,
        version: int | None = None,
    ) -> Path:
        """Write `export_markdown` to `path` (parent folders are created); returns the path."""
        text = await self.export_markdown(conversation_id, artifact_id, version)
        target = Path(path)

        def write() -> None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")

        await asyncio.to_thread(write)
        return target
