"""`eval_sessions`: replay every session file of a folder, for CI over golden sessions.

Files are replayed one after the other (each in its own sandbox) in name order. A file that
cannot be read or replayed is a `failed` row with the reason; it never stops the others.
`EvalResult.ok` is true only when every file replayed the same.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from ..errors import UserError
from .replayer import _reason, replay_session
from .report import ReplayReport, ReportDict, Verdict

if TYPE_CHECKING:
    from ..settings import Settings

PATTERN = "*.jsonl"



class EvalDict(TypedDict):
    """`EvalReport.to_dict()`: what `artifactflow eval --json` prints."""

    folder: str
    ok: bool
    counts: dict[str, int]  # verdict → sessions
    sessions: list[ReportDict]

@dataclass
class EvalResult:
    folder: str
    reports: list[ReplayReport]

    @property
    def ok(self) -> bool:
        return bool(self.reports) and all(r.ok for r in self.reports)

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def counts(self) -> dict[str, int]:
        out = {v.value: 0 for v in Verdict}
        for report in self.reports:
            out[report.verdict.value] += 1
        return out

    def rows(self) -> list[tuple[str, str]]:
        """(file name, `same` / `diverged at step N: …` / `failed: …`)."""
        return [(Path(r.path or "?").name, r.line()) for r in self.reports]

    def table(self) -> str:
        rows = [("FILE", "RESULT"), *self.rows()]
        width = max(len(name) for name, _ in rows)
        lines = [f"{name:<{width}}  {result}" for name, result in rows]
        counts = self.counts()
        lines.append(
            f"{len(self.reports)} sessions: {counts['same']} same, {counts['diverged']} "
            f"diverged, {counts['failed']} failed"
        )
        return "\n".join(lines)

    def to_dict(self) -> EvalDict:
        return {"folder": self.folder, "ok": self.ok, "counts": self.counts(),
                "sessions": [r.to_dict() for r in self.reports]}


def session_files(root: Path, pattern: str = PATTERN) -> list[Path]:
    if not root.is_dir():
        raise UserError(f"{root} is not a folder; give the folder that holds the session files")
    return sorted(p for p in root.glob(pattern) if p.is_file())


async def eval_sessions(
    folder: str | Path,
    settings: Settings | None = None,
    *,
    pattern: str = PATTERN,
    live_model: bool = False,
    extra_tools: list[Any] | None = None,
) -> EvalResult:
    """Replay every file matching `pattern` in `folder` under `settings`."""
    root = Path(folder)
    files = await asyncio.to_thread(session_files, root, pattern)
    if not files:
        raise UserError(f"no session files ({pattern}) in {root}; write some with `artifactflow export`")
    reports = []
    for path in files:
        try:
            report = await replay_session(path, settings, live_model=live_model,
                                          extra_tools=extra_tools)
        except Exception as exc:
            report = ReplayReport(str(path), Verdict.FAILED, 0, error=_reason(exc))
        reports.append(report)
    return EvalResult(str(root), reports)
