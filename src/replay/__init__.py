"""Record and replay: golden sessions for regression evals.

- `recording`: every model request of a run is stored with its response (`af_model_calls`).
- `export`: a stored run → a self-contained `Session` (`session`: the JSON-lines file format).
- `replayer`: re-run a session under the current config on a temporary data folder, with the
  recorded responses and tool results served back (`serve`, `sandbox`), and report the first
  divergence with a diff (`diff`, `report`); `live`: send the recorded requests to the current
  model instead.
- `evaluate`: replay a folder of sessions, for CI.

"""

from __future__ import annotations

from .evaluate import EvalResult, eval_sessions
from .export import export_session
from .replayer import replay_session
from .report import Divergence, DivergenceKind, ReplayReport, Verdict
from .session import Session, SessionFileError, read_session

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
