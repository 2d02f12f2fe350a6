"""The examples the README sends a newcomer to run, run: each ends as it says (offline)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_research_demo_runs_offline_to_its_report(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "research_demo.py"), "--data-dir", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "artifact_created" in done.stdout and "'artifact_id': 'report'" in done.stdout
    assert "complete" in done.stdout and "conversation: " in done.stdout
