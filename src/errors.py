"""The exception tree.

One base class; `UserError` for mistakes by whoever configures or calls the library (bad
config, bad arguments); run errors carry the ids they concern. LangGraph's own control-flow
signals (`GraphInterrupt`) are deliberately not part of this tree.
"""

from __future__ import annotations

import os
import re

# --- the process's own secrets, kept out of every error text ------------------------------
# A provider may echo the API key it refused ("Incorrect API key provided: sk-..."), a
# database driver the password of its URL. Every `ArtifactFlowError`'s text goes through
# `scrub_secrets`, and so does each error text stored or printed that did not start as one
# (a run's failure, the HTTP layer's 500, the command line's last word), so no copy of it —
# event, message row, model-call record, checkpoint, API answer, terminal — holds a secret.

REDACTED = "[redacted]"
_SECRET_ENV = re.compile(r"(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)$", re.IGNORECASE)
_KEY_SHAPES = re.compile(r"\b(sk-(?:proj-|ant-)?)[A-Za-z0-9_\-]{12,}|\b(Bearer\s+)[A-Za-z0-9._~+/\-]{12,}=*")
_URL_PASSWORD = re.compile(r"(://[^:/@\s]+:)[^@/\s]+@")
_REGISTERED: set[str] = set()


def register_secret(value: str | None) -> None:
    """Keep `value` (a key or token this process holds outside the environment) out of errors."""
    if value and len(value) >= 8:
        _REGISTERED.add(value)


def _known_secrets() -> list[str]:
    values = {v for k, v in os.environ.items() if _SECRET_ENV.search(k) and len(v) >= 8}
    return sorted(values | _REGISTERED, key=len, reverse=True)


def scrub_secrets(text: str) -> str:
    """`text` without the process's secrets: the values of its `*_API_KEY`, `*_TOKEN`,
    `*_SECRET`, `*PASSWORD` environment variables and registered ones, key-shaped strings
    (`sk-...`, `Bearer ...`) and passwords in URLs."""
    if not text:
        return text
    for secret in _known_secrets():
        if secret in text:
            text = text.replace(secret, REDACTED)
    text = _KEY_SHAPES.sub(lambda m: (m.group(1) or m.group(2)) + REDACTED, text)
    return _URL_PASSWORD.sub(lambda m: m.group(1) + REDACTED + "@", text)


class ArtifactFlowError(Exception):
    """Base class of every error raised by artifactflow. Its text never holds the process's
    secrets (`scrub_secrets`)."""

    def __init__(self, *args: object) -> None:
        super().__init__(*(scrub_secrets(a) if isinstance(a, str) else a for a in args))


class UserError(ArtifactFlowError):
    """A mistake by the developer or operator: fix the call or the configuration."""


class ConfigError(UserError):
    """Settings, agent files, model profiles or plugins are invalid."""


class MissingCredentialsError(ConfigError):
    """No endpoint or API key is configured for a model that is needed."""


class NotFoundError(ArtifactFlowError):
    """A conversation, message or artifact does not exist (or is not yours)."""


class WorkflowInputError(UserError):
    """A workflow run's input does not match the workflow's input schema; nothing was started.
    The HTTP layer answers 422, like any request body that fails its schema."""


class MemoryTextError(UserError):
    """A memory's text is empty or longer than `memory.max_chars`; nothing was stored. The HTTP
    layer answers 422 and the CLI exits 2, as for any argument that fails validation."""


class InvalidResumeError(UserError):
    """Resume data does not answer the pending tool calls correctly; nothing was run."""

    def __init__(self, message: str, *, message_id: str | None = None) -> None:
        super().__init__(message)
        self.message_id = message_id


class ResumeConflictError(ArtifactFlowError):
    """The pause was already answered, or the thread is already running.

    Raised to the loser of two concurrent resumes; the HTTP layer maps it to 409.
    """

    def __init__(self, message: str, *, message_id: str | None = None) -> None:
        super().__init__(message)
        self.message_id = message_id


class CancelConflictError(ResumeConflictError):
    """A cancel arrived after the run had ended otherwise (completed, failed); the HTTP layer
    maps it to 409, like a resume's conflict."""


class CancelRequested(Exception):  # noqa: N818 - a control-flow signal, not an error
    """A cancel was accepted for the run (`core/run/cancel.py`): it must stop and end
    `cancelled`. Raised inside the run (an approved tool refusing to start, a final status
    change that lost to the cancel) and turned into the cancelled ending by the segment; never
    seen by callers. Outside the error tree, like LangGraph's `GraphInterrupt`."""

    def __init__(self, message_id: str) -> None:
        super().__init__(f"message {message_id}: a cancel was accepted")
        self.message_id = message_id


class LeaseLostError(ArtifactFlowError):
    """A run lost ownership of its message (its lease expired and another process took it
    over, or it was cancelled): it must stop and write nothing more."""

    def __init__(self, message: str, *, message_id: str | None = None) -> None:
        super().__init__(message)
        self.message_id = message_id


class StoreUnavailableError(ArtifactFlowError):
    """The database cannot be reached or written right now: the server is down or restarting,
    the disk is full, or the data folder is read-only. Nothing is wrong with the request;
    the same call may succeed later (the HTTP layer answers 503 with `Retry-After`).

    `reason` is short and stable ("database unavailable", "disk full", "read-only").
    """

    def __init__(self, message: str, *, reason: str, retry_after: int = 5) -> None:
        super().__init__(message)
        self.reason = reason
        self.retry_after = retry_after


class ArtifactConflictError(ArtifactFlowError):
    """Optimistic locking failed: someone else changed the artifact first."""


class LLMError(ArtifactFlowError):
    """The model provider failed after retries, or answered something unusable.

    A `Model` raises one of the three subclasses, so callers can act on the kind of failure
    without knowing the provider: retry later, shorten the context, or give up.
    """

    def __init__(self, message: str, *, agent: str | None = None, retryable: bool = False):
        super().__init__(message)
        self.agent = agent
        self.retryable = retryable


class RetryableLLMError(LLMError):
    """A transient failure (rate limit, 5xx, timeout, lost connection).

    Raised once the model's own retries are spent, or when output had already reached the
    user (a replay would show it twice). The same request may succeed later.
    """

    def __init__(
        self,
        message: str,
        *,
        agent: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, agent=agent, retryable=True)
        self.retry_after = retry_after


class ContextOverflowError(LLMError):
    """The request does not fit the model's context window: shorten the messages (compact
    the memory, truncate tool results) or pick a model with a larger window."""


class FatalLLMError(LLMError):
    """The provider refused the request (bad key, unknown model, invalid request): sending it
    again unchanged will fail again. Fix the configuration or the request."""
