"""Record and replay: golden sessions for regression evals.

- `recording`: every model request of a run is stored with its response (`af_model_calls`).
- `export`: a stored run → a self-contained `Session` (`session`: the JSON-lines file format).
- `replayer`: re-run a session under the current config on a temporary data folder, with the
  recorded responses and tool results served back (`serve`, `sandbox`), and report the first
  divergence with a diff (`diff`, `report`); `live`: send the recorded requests to the current
  model instead.
- `evaluate`: replay a folder of sessions, for CI.

Public names are loaded lazily: `core.engine` imports `recording` while the package's other
modules import the controller.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "Divergence",
    "DivergenceKind",
    "EvalResult",
    "ReplayReport",
    "Session",
    "SessionFileError",
    "Verdict",
    "eval_sessions",
    "export_session",
    "read_session",
    "replay_session",
]

_WHERE = {
    "Divergence": "report",
    "DivergenceKind": "report",
    "ReplayReport": "report",
    "Verdict": "report",
    "EvalResult": "evaluate",
    "eval_sessions": "evaluate",
    "Session": "session",
    "SessionFileError": "session",
    "read_session": "session",
    "export_session": "export",
    "replay_session": "replayer",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'artifactflow.replay' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{module}"), name)
