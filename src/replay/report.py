"""What a replay found: the first divergence with its diff, or that the run was the same."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TypedDict


class Verdict(enum.StrEnum):
    SAME = "same"
    DIVERGED = "diverged"
    FAILED = "failed"  # the replay itself could not run (bad file, config error)


class DivergenceKind(enum.StrEnum):
    MESSAGES = "messages"  # different messages sent to the model
    TOOL_SPECS = "tool_specs"  # same messages, different tools offered
    EXTRA_REQUEST = "extra_request"  # a model request the recorded run never made
    ENDED_EARLY = "ended_early"  # the recorded run made more requests
    TOOL_CALL = "tool_call"  # a tool call the recorded run never made
    TOOL_ARGUMENTS = "tool_arguments"  # the same call with different arguments
    TOOL_RESULT = "tool_result"  # an artifact tool (run in the sandbox) answered differently
    PERMISSION = "permission"  # a pause the recorded run did not have, or the other way round
    OUTCOME = "outcome"  # the run ended differently (status, outcome, answer)
    RESPONSE = "response"  # --live-model: the model's text changed
    TOOL_CALLS = "tool_calls"  # --live-model: the model's tool calls changed
    MODEL_ERROR = "model_error"  # --live-model: the current model failed


class DivergenceDict(TypedDict):
    step: int
    kind: str
    agent: str | None
    summary: str
    diff: str


class LiveStepDict(TypedDict):
    step: int
    agent: str | None
    verdict: str
    similarity: float | None
    divergence: DivergenceDict | None


class ReportDict(TypedDict):
    """`ReplayReport.to_dict()`: what `artifactflow replay --json` prints."""

    path: str | None
    verdict: str
    steps: int
    replayed: int
    divergence: DivergenceDict | None
    error: str | None
    notes: list[str]
    live: list[LiveStepDict] | None


@dataclass
class Divergence:
    step: int  # 1-based model request of the recording where behaviour first differs
    kind: DivergenceKind
    summary: str  # one line
    agent: str | None = None
    diff: str = ""  # unified diff, recorded → replay

    def to_dict(self) -> DivergenceDict:
        return {"step": self.step, "kind": self.kind.value, "agent": self.agent,
                "summary": self.summary, "diff": self.diff}


@dataclass
class LiveStep:
    """--live-model: one recorded request sent to the current model."""

    step: int
    agent: str | None
    verdict: str  # same | text changed | tool calls changed | failed
    similarity: float | None = None
    divergence: Divergence | None = None


@dataclass
class ReplayReport:
    path: str | None
    verdict: Verdict
    steps: int  # model requests in the recording
    replayed: int = 0  # recorded requests served (or sent, with --live-model)
    divergence: Divergence | None = None
    error: str | None = None  # why the replay failed
    notes: list[str] = field(default_factory=list)
    live: list[LiveStep] | None = None

    @property
    def ok(self) -> bool:
        return self.verdict is Verdict.SAME

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def line(self) -> str:
        """`same`, `diverged at step N: …` or `failed: …`."""
        if self.verdict is Verdict.SAME:
            return f"same ({self.steps} step{'' if self.steps == 1 else 's'})"
        if self.verdict is Verdict.FAILED:
            return f"failed: {self.error}"
        assert self.divergence is not None
        return f"diverged at step {self.divergence.step}: {self.divergence.summary}"

    def to_dict(self) -> ReportDict:
        return {
            "path": self.path,
            "verdict": self.verdict.value,
            "steps": self.steps,
            "replayed": self.replayed,
            "divergence": self.divergence.to_dict() if self.divergence else None,
            "error": self.error,
            "notes": list(self.notes),
            "live": None
            if self.live is None
            else [
                {"step": s.step, "agent": s.agent, "verdict": s.verdict,
                 "similarity": s.similarity,
                 "divergence": s.divergence.to_dict() if s.divergence else None}
                for s in self.live
            ],
        }
