"""Exit codes of the `artifactflow` command. Scripts key on them: never renumber.

| code | meaning                                                                      |
|------|------------------------------------------------------------------------------|
| 0    | success                                                                      |
| 1    | the run failed (an `error` event) or an unexpected error; also a database    |
|      | that cannot be written (disk full, read-only, unreachable): the line names   |
|      | the message id and the cause, and the message is marked failed once writes   |
|      | succeed again                                                                |
| 2    | bad usage or settings, missing credentials, invalid resume decisions, or an  |
|      | unknown conversation / message / artifact                                    |
| 3    | paused: tool calls wait for approval and nobody could answer (no TTY or      |
|      | `--no-input`); continue with `artifactflow resume MESSAGE_ID --approve`      |
| 4    | the run stopped at the agent's `max_tool_rounds` limit, or by the loop guard |
| 5    | conflict: the pause was already answered, the message is running, or a      |
|      | retry of a message that neither failed nor was cancelled                     |
| 6    | the run stopped at a budget (`budget.max_tokens`, `budget.max_cost_usd`,     |
|      | `budget.max_seconds` or an agent's `max_tokens`); the partial answer is saved |
| 7    | `serve`: the address is in use (another server on that port) or cannot be    |
|      | bound; nothing was started                                                   |
| 130  | cancelled (Ctrl-C); the partial answer is saved                              |
| 143  | cancelled by SIGTERM (systemd, `timeout`, a container stop), as Ctrl-C       |
"""

from __future__ import annotations

from ..errors import NotFoundError, ResumeConflictError, UserError
from ..events.status import EventType, Outcome

OK = 0
FAILED = 1
USAGE = 2
PAUSED = 3
MAX_ROUNDS = 4
CONFLICT = 5
BUDGET = 6
PORT_BUSY = 7
CANCELLED = 130
TERMINATED = 143

HELP = (
    "Exit codes: 0 success · 1 run failed or unexpected error · 2 bad usage, settings, "
    "missing credentials, invalid decisions or unknown id · 3 paused waiting for approval "
    "(non-interactive) · 4 stopped at max_tool_rounds or by the loop guard · 5 conflict (already resumed, running, "
    "or not retryable) · 6 stopped at a token, cost or time budget · 130 cancelled (Ctrl-C) "
    "· 143 cancelled (SIGTERM) · 7 serve: the port is in use."
)


def for_exception(exc: BaseException) -> int:
    """The exit code for an error that ends a command."""
    if isinstance(exc, ResumeConflictError):
        return CONFLICT
    if isinstance(exc, UserError | NotFoundError):
        return USAGE
    return FAILED


def for_outcome(event_type: EventType | str | None, outcome: str | None = None) -> int:
    """The exit code for the last word of a run's event stream."""
    if event_type == EventType.COMPLETE:
        stopped: dict[str, int] = {Outcome.MAX_TOOL_ROUNDS: MAX_ROUNDS, Outcome.LOOP_DETECTED: MAX_ROUNDS,
                                   Outcome.BUDGET_EXCEEDED: BUDGET}
        return stopped.get(outcome or "", OK)
    if event_type == EventType.CANCELLED:
        return CANCELLED
    if event_type == EventType.PERMISSION_REQUEST:
        return PAUSED
    return FAILED
