"""Reading the file of `artifactflow memory import`: one memory per non-empty line, or, when
every non-empty line is a JSON object, JSON lines whose "text" field is the memory (as
`memory list --json` items carry it). A line that is neither exits 2 naming it."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

from ..errors import UserError


def read_memories(file: str) -> list[str]:
    try:
        raw = sys.stdin.read() if file == "-" else Path(file).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {file}: {exc}") from exc
    lines = [(n, line) for n, line in enumerate(raw.splitlines(), start=1) if line.strip()]
    if not lines:
        raise UserError(f"{file} holds no memories")
    if not all(line.lstrip().startswith("{") for _, line in lines):
        return [line for _, line in lines]
    texts = []
    for number, line in lines:
        try:
            item = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise UserError(f"{file}, line {number}: not JSON ({exc})") from exc
        text = item.get("text") if isinstance(item, dict) else None
        if not isinstance(text, str):
            raise UserError(f"{file}, line {number}: a JSON line needs a \"text\" string")
        texts.append(text)
    return texts
