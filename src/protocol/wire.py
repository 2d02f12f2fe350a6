"""The Agent Protocol's request bodies and queries as pydantic models, shaped after the
`langgraph_sdk` TypedDicts (`langgraph_sdk/schema.py`) and the payloads its client sends.

Every protocol route reads its body through one of these, so a wrong type is a 422
`{"detail": [...]}` from FastAPI's validation BEFORE the route stores, starts, resumes or
cancels anything. The models are strict (a string is not a number, a list is not an object)
and free-form JSON (metadata, input, config, store values) is bounded at the boundary: at most
`MAX_DEPTH` levels, and text that a database can store (no lone UTF-16 surrogate such as
`"\\ud800"`, no NUL). Keys the SDK sends that we do not read are ignored; fields for features
we do not have answer 422 naming the field (`unsupported`).
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

MAX_DEPTH = 32  # nesting levels of free-form JSON (a ~300-deep metadata is refused, not stored)
MAX_OFFSET = 1_000_000_000
MAX_LIMIT = 10_000
MAX_EVENT_ID = 2**62  # above any id our event log hands out; larger is refused, not sent to SQL
INT_RANGE = (-(2**63), 2**63 - 1)  # JSON integers the stores' encoders (orjson, SQL) can hold


def clean_text(value: str, where: str = "text") -> str:
    """`value` if a database can store it: no NUL and no lone surrogate (JSON lets a client
    send `"\\ud800"`, which neither SQLite's UTF-8 nor PostgreSQL's text can hold)."""
    if "\x00" in value:
        raise ValueError(f"{where} contains NUL (\\u0000)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{where} contains a lone UTF-16 surrogate (not valid Unicode)") from None
    return value


def check_json(value: Any, depth: int = 0) -> Any:
    """`value` if it is JSON of at most `MAX_DEPTH` levels whose strings and keys are clean
    and whose integers fit in 64 bits (a larger one made the store's encoder fail: 500)."""
    if depth > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        clean_text(value)
    elif isinstance(value, int) and not INT_RANGE[0] <= value <= INT_RANGE[1]:
        raise ValueError("an integer beyond the signed 64-bit range")
    elif isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError("object keys must be strings")
            clean_text(key, "a key")
            check_json(item, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            check_json(item, depth + 1)
    return value


Text = Annotated[str, AfterValidator(clean_text)]
Id = Annotated[str, Field(min_length=1, max_length=200), AfterValidator(clean_text)]
JSONObject = Annotated[dict[str, Any], AfterValidator(check_json)]
AnyJSON = Annotated[Any, AfterValidator(check_json)]
Limit = Annotated[int, Field(ge=0, le=MAX_LIMIT)]
Offset = Annotated[int, Field(ge=0, le=MAX_OFFSET)]

StreamMode = Literal[
    "values",
    "messages",
    "updates",
    "events",
    "tasks",
    "checkpoints",
    "debug",
    "custom",
    "messages-tuple",
]
MultitaskStrategy = Literal["reject", "interrupt", "rollback", "enqueue"]
ThreadStatus = Literal["idle", "busy", "interrupted", "error"]
RunStatus = Literal["pending", "running", "error", "success", "timeout", "interrupted"]
SortOrder = Literal["asc", "desc"]
NODES = ("lead_agent", "tool_execution", "subagent")  # the lead graph's nodes (see /graph)


BODY_MARGIN = 4  # levels between a body's root and its deepest free-form JSON field


def check_body(value: Any) -> Any:
    """The whole raw body bounded and clean, keys we ignore included: an ignored key holding
    a 300-deep object or a lone surrogate is refused like a read one (else the request went
    ahead with the hostile part silently dropped)."""
    return check_json(value, -BODY_MARGIN)


class Wire(BaseModel):
    """A request body: strict types, unknown keys ignored (the SDK sends more than we read),
    but bounded and clean whole (`check_body`)."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)
    UNSUPPORTED: ClassVar[tuple[str, ...]] = ()

    @model_validator(mode="before")
    @classmethod
    def _bounded(cls, data: Any) -> Any:
        return check_body(data)

    @model_validator(mode="after")
    def _unsupported(self) -> Self:
        """422 naming each field of `UNSUPPORTED` that is set: a feature we do not have is
        refused, never accepted and ignored."""
        for name in self.UNSUPPORTED:
            if getattr(self, name, None) not in (None, [], {}):
                raise UnsupportedError(name)
        return self


class UnsupportedError(ValueError):
    def __init__(self, field: str) -> None:
        super().__init__(f"{field}: not supported by this server (see docs/agent-protocol.md)")
        self.field = field


class CheckpointRef(BaseModel):
    """`Checkpoint` (thread_id, checkpoint_ns, checkpoint_id, checkpoint_map)."""

    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)
    thread_id: Id | None = None
    checkpoint_ns: Text | None = None
    checkpoint_id: Id | None = None
    checkpoint_map: JSONObject | None = None


class ThreadCreate(Wire):
    UNSUPPORTED = ("supersteps", "ttl")
    thread_id: Id | None = None
    metadata: JSONObject | None = None
    if_exists: Literal["raise", "do_nothing"] | None = None
    supersteps: list[JSONObject] | None = None
    ttl: int | float | JSONObject | None = None


class ThreadPatch(Wire):
    UNSUPPORTED = ("ttl",)
    metadata: JSONObject | None = None
    ttl: int | float | JSONObject | None = None


class ThreadSearch(Wire):
    UNSUPPORTED = ("values", "extract")
    metadata: JSONObject | None = None
    values: JSONObject | None = None
    ids: list[Id] | None = None
    status: ThreadStatus | None = None
    limit: Limit = 10
    offset: Offset = 0
    sort_by: Literal["thread_id", "status", "created_at", "updated_at"] | None = None
    sort_order: SortOrder | None = None
    select: list[Text] | None = None
    extract: JSONObject | None = None


class ThreadCount(Wire):
    UNSUPPORTED = ("values",)
    metadata: JSONObject | None = None
    values: JSONObject | None = None
    status: ThreadStatus | None = None


class StateCheckpoint(Wire):
    """`POST /threads/{id}/state/checkpoint`."""

    checkpoint: CheckpointRef
    subgraphs: bool = False


class StateUpdate(Wire):
    """`POST /threads/{id}/state` (`threads.update_state`)."""

    values: JSONObject | list[JSONObject] | None = None
    as_node: Text | None = None
    checkpoint: CheckpointRef | None = None
    checkpoint_id: Id | None = None

    @property
    def checkpoint_at(self) -> str | None:
        return self.checkpoint_id or (self.checkpoint.checkpoint_id if self.checkpoint else None)


class Configurable(BaseModel):
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)
    configurable: CheckpointRef


class History(Wire):
    """`POST /threads/{id}/history`: `before` is a checkpoint id, a `Checkpoint` or a config
    (`{"configurable": {"checkpoint_id": ...}}`); `metadata` keeps the states whose metadata
    has those values (e.g. `{"source": "input"}`)."""

    limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] = 10
    before: Id | Configurable | CheckpointRef | None = None
    metadata: JSONObject | None = None
    checkpoint: CheckpointRef | None = None

    @property
    def before_id(self) -> str | None:
        before = self.before
        if isinstance(before, Configurable):
            return before.configurable.checkpoint_id
        if isinstance(before, CheckpointRef):
            return before.checkpoint_id
        return before


class AssistantSearch(Wire):
    metadata: JSONObject | None = None
    graph_id: Id | None = None
    name: Text | None = None
    limit: Limit = 10
    offset: Offset = 0
    sort_by: Text | None = None
    sort_order: SortOrder | None = None
    select: list[Text] | None = None


class AssistantCount(Wire):
    metadata: JSONObject | None = None
    graph_id: Id | None = None
    name: Text | None = None


class Command(BaseModel):
    """`Command`: only `resume` is supported (a permission pause's decisions)."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)
    resume: AnyJSON = None
    update: AnyJSON = None
    goto: AnyJSON = None

    @model_validator(mode="after")
    def _only_resume(self) -> Command:
        if self.update is not None:
            raise UnsupportedError("command.update")
        if self.goto is not None:
            raise UnsupportedError("command.goto")
        return self

    @property
    def resuming(self) -> bool:
        return "resume" in self.model_fields_set


class RunCreate(Wire):
    """`RunCreate` plus what `runs.stream/wait/create` send."""

    assistant_id: Id
    input: JSONObject | Text | None = None
    command: Command | None = None
    stream_mode: StreamMode | list[StreamMode] | None = None
    stream_subgraphs: bool | None = None
    stream_resumable: bool | None = None
    config: JSONObject | None = None
    context: JSONObject | None = None
    metadata: JSONObject | None = None
    interrupt_before: Literal["*"] | list[Text] | None = None
    interrupt_after: Literal["*"] | list[Text] | None = None
    feedback_keys: list[Text] | None = None
    webhook: Text | None = None
    checkpoint: CheckpointRef | None = None
    checkpoint_id: Id | None = None
    checkpoint_during: bool | None = None
    multitask_strategy: MultitaskStrategy | None = None
    if_not_exists: Literal["create", "reject"] | None = None
    on_disconnect: Literal["cancel", "continue"] | None = None
    on_completion: Literal["delete", "keep"] | None = None
    after_seconds: Annotated[float, Field(ge=0, le=10_000_000)] | None = None
    durability: Literal["sync", "async", "exit"] | None = None
    strict_resume: bool | None = None
    langsmith_tracer: JSONObject | None = None

    @model_validator(mode="after")
    def _features(self) -> RunCreate:
        for name in ("interrupt_before", "interrupt_after"):
            asked = getattr(self, name)
            if asked is None or asked == []:
                continue
            unknown = [n for n in asked if n not in NODES] if isinstance(asked, list) else []
            if unknown:
                raise ValueError(f"{name}: {unknown} are not nodes of the graph ({list(NODES)})")
            raise UnsupportedError(name)  # pauses come from tool permissions, not node names
        # input beside a resume is ignored: agent-chat-ui resumes with `submit({}, {command})`
        return self

    @property
    def modes(self) -> list[str]:
        mode = self.stream_mode
        modes = [mode] if isinstance(mode, str) else list(mode or [])
        return list(dict.fromkeys(modes)) or ["values"]

    @property
    def checkpoint_at(self) -> str | None:
        return self.checkpoint_id or (self.checkpoint.checkpoint_id if self.checkpoint else None)

    @property
    def strategy(self) -> str:
        return self.multitask_strategy or "reject"

    def streaming(self) -> dict[str, Any]:
        """What a join or a reconnect needs of the request: its stream modes."""
        out: dict[str, Any] = {"stream_mode": self.modes}
        if self.stream_subgraphs:
            out["stream_subgraphs"] = True
        return out

    def queued(self) -> dict[str, Any]:
        """A queued run's request, to start it later (read back with `RunCreate`)."""
        return self.model_dump(
            mode="json",
            include={"input", "assistant_id", "metadata", "config", "context", "stream_mode",
                     "stream_subgraphs", "checkpoint_id", "webhook"},
            exclude_none=True,
        )
