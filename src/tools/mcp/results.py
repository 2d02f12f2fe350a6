"""An MCP `CallToolResult` → our `ToolResult`.

- Text blocks (and text resources) are what the model reads, joined by blank lines.
- `structuredContent` is kept whole in `metadata["structured_content"]` for programs reading
  the event log; the model sees it only when the server sent no text (servers are asked by
  the spec to mirror it as text).
- Images, audio and binary resources never reach the model or the event log as base64: each
  is written once to `DATA_DIR/mcp_media/<sha256>.<ext>` and replaced by a reference (kind,
  MIME type, size, path) in `metadata["attachments"]` and a one-line note the model sees.
  Resource links become references too.
- `isError` makes a failed result whose error text is the server's text.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import mimetypes
from pathlib import Path
from typing import Any

from ..base import ToolResult

MEDIA_FOLDER = "mcp_media"


def to_tool_result(
    result: Any, *, server: str, tool: str, media_dir: Path | None
) -> ToolResult:
    texts: list[str] = []
    attachments: list[dict[str, Any]] = []
    for block in result.content or []:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text)
        elif kind in ("image", "audio"):
            ref = _save_blob(kind, block.data, block.mime_type, media_dir)
            attachments.append(ref)
            texts.append(_note(ref))
        elif kind == "resource":
            resource = block.resource
            if getattr(resource, "text", None) is not None:
                texts.append(resource.text)
            else:
                ref = _save_blob("resource", resource.blob, resource.mime_type, media_dir)
                ref["uri"] = str(resource.uri)
                attachments.append(ref)
                texts.append(_note(ref))
        elif kind == "resource_link":
            ref = {"kind": "resource_link", "uri": str(block.uri), "name": block.name,
                   "mime_type": block.mime_type}
            attachments.append(ref)
            texts.append(_note(ref))
    structured = getattr(result, "structured_content", None)
    metadata: dict[str, Any] = {"mcp_server": server, "mcp_tool": tool}
    if structured is not None:
        metadata["structured_content"] = structured
    if attachments:
        metadata["attachments"] = attachments
    text = "\n\n".join(t for t in texts if t)
    if getattr(result, "is_error", False):
        return ToolResult(success=False, error=text or f"MCP tool '{tool}' failed",
                          metadata=metadata)
    if not texts and structured is not None:
        return ToolResult(success=True, data=structured, metadata=metadata)
    return ToolResult(success=True, data=text, metadata=metadata)


def _save_blob(kind: str, data: str, mime_type: str | None, folder: Path | None) -> dict[str, Any]:
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raw = data.encode("utf-8", "replace")
    digest = hashlib.sha256(raw).hexdigest()
    ref: dict[str, Any] = {"kind": kind, "mime_type": mime_type, "bytes": len(raw),
                           "sha256": digest}
    if folder is not None:
        ext = (mimetypes.guess_extension(mime_type or "") or ".bin").lstrip(".")
        path = folder / f"{digest}.{ext}"
        if not path.exists():  # content-addressed: a re-run writes nothing new
            folder.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(".part")
            tmp.write_bytes(raw)
            tmp.replace(path)
        ref["path"] = str(path)
    return ref


def _note(ref: dict[str, Any]) -> str:
    if ref["kind"] == "resource_link":
        return f"[resource link: {ref['uri']}" + (f" ({ref['name']})" if ref.get("name") else "") + "]"
    where = f" saved as {ref['path']}" if ref.get("path") else ""
    return f"[{ref['kind']} {ref.get('mime_type') or ''} ({ref['bytes']} bytes){where}]".replace(
        "  ", " "
    )

