"""Workflow files: `config/workflows/*.yaml`, one workflow per file.

```yaml
name: triage                      # default: the file name
description: Classify a ticket and route it
input:                            # JSON Schema of the workflow input (checked by `start`)
  type: object
  properties: {ticket: {type: string}}
  required: [ticket]
nodes:
  - {id: start, role: start}
  - id: classify
    role: linear
    kind: agent                   # or `tool` (a deterministic step)
    agent: classifier             # an agent file in config/agents/
    instruction: "Classify: {{ input.ticket }}"
    output_schema: {type: object, properties: {category: {enum: [bug, billing, other]}}}
    on_failure: fail              # or `continue`
  - {id: route, role: decision, route_on: "{{ nodes.classify.output.category }}"}
  ...
edges:
  - {from: start, to: classify}
  - {from: route, to: fix_bug, label: bug}
  - {from: review, to: plan, label: more, max_iterations: 1}   # a bounded loop
```

This module only parses (pydantic at the boundary: unknown keys and wrong types are errors
with the file and field). Whether the graph makes sense is `validate.py`'s job, which reports
every problem at once.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import ErrorDetails

from ..shapes import JsonObject
from .errors import WorkflowIssue, WorkflowValidationError

Role = Literal["start", "linear", "decision", "branch", "split", "merge", "exit"]
ROLES: tuple[str, ...] = ("start", "linear", "decision", "branch", "split", "merge", "exit")
Strategy = Literal["list", "concatenate", "agent", "first"]
ID_PATTERN = r"^[A-Za-z][A-Za-z0-9_\-]{0,63}$"


class NodeSpec(BaseModel):
    """One node. Which fields apply depends on `role` and `kind` (see the table in docs/workflows.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=ID_PATTERN)
    role: Role
    description: str = ""
    kind: Literal["agent", "tool", "group"] | None = None
    agent: str | None = None
    tool: str | None = None
    instruction: str | None = None
    arguments: JsonObject | None = None
    output_schema: JsonObject | None = None
    on_failure: Literal["fail", "continue"] = "fail"
    over: str | None = None  # split: a reference to the list to fan out over
    strategy: Strategy | None = None  # merge
    separator: str = "\n\n"  # merge strategy `concatenate`
    route_on: str | None = None  # decision without an agent: the value that names the label
    fallback: str | None = None  # decision: label taken when the chosen loop is exhausted
    output: Any = None  # exit: template of the workflow's output
    agents: tuple[str, ...] | None = None  # group: its members, in speaking order
    mode: Literal["handoff", "order", "moderator"] | None = None  # group: who speaks next
    moderator: str | None = None  # group in moderator mode: the agent that picks
    max_turns: int | None = Field(None, ge=1, le=100)  # group: turns before outcome max_turns
    # agent: recall memories before the step's first model call with this context profile
    # (compact, standard, comprehensive or one of `memory.profiles`), whatever the agent's spec says
    memory_profile: str | None = None


class EdgeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    source: str = Field(alias="from")
    target: str = Field(alias="to")
    label: str | None = None
    max_iterations: int | None = Field(None, ge=1, le=1000)

    @field_validator("label", mode="before")
    @classmethod
    def _label_text(cls, value: object) -> object:
        if isinstance(value, bool):  # YAML 1.1 reads yes/no/on/off as booleans
            raise ValueError(
                f"YAML read this label as the boolean {value}; quote it (label: \"yes\")"
            )
        if isinstance(value, int | float):
            return str(value)
        return value


class WorkflowSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=ID_PATTERN)
    description: str = ""
    input: JsonObject = Field(default_factory=lambda: {"type": "object"})
    nodes: tuple[NodeSpec, ...]
    edges: tuple[EdgeSpec, ...] = ()
    source: str | None = None  # the file it came from
    text: str | None = None  # the file's text, stored with each run (resume uses it)

    @property
    def digest(self) -> str:
        return hashlib.sha256((self.text or self.model_dump_json()).encode()).hexdigest()[:16]

    def node(self, node_id: str) -> NodeSpec:
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(node_id)


def parse_workflow(text: str, *, source: str, default_name: str | None = None) -> WorkflowSpec:
    """Parse one workflow's YAML text; errors name the file and the field."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise WorkflowValidationError(
            [WorkflowIssue(source, None, f"invalid YAML: {exc}", "fix the YAML syntax")]
        ) from None
    if not isinstance(data, dict):
        raise WorkflowValidationError(
            [WorkflowIssue(source, None, "expected a mapping at the top level",
                           "start the file with name:, nodes: and edges:")]
        )
    if default_name is not None:
        data.setdefault("name", default_name)
    data.pop("source", None)
    data.pop("text", None)
    try:
        return WorkflowSpec(**data, source=source, text=text)
    except ValidationError as exc:
        raise WorkflowValidationError([_issue(source, data, err) for err in exc.errors()]) from None


def _issue(source: str, data: JsonObject, err: ErrorDetails) -> WorkflowIssue:
    loc = list(err["loc"])
    node = None
    if len(loc) >= 2 and loc[0] == "nodes" and isinstance(loc[1], int):
        nodes = data.get("nodes") or []
        raw = nodes[loc[1]] if loc[1] < len(nodes) else None
        node = raw.get("id") if isinstance(raw, dict) and isinstance(raw.get("id"), str) else f"#{loc[1] + 1}"
        loc = loc[2:]
    where = ".".join(str(p) for p in loc) or "the file"
    fix = {
        "missing": "add the field",
        "extra_forbidden": "remove it, or check its spelling",
        "literal_error": "use one of the values listed",
        "string_pattern_mismatch": "use letters, digits, '_' or '-', starting with a letter",
    }.get(err["type"], "correct the value")
    return WorkflowIssue(source, node, f"field '{where}': {err['msg']}", fix)


def load_workflow_file(path: Path) -> WorkflowSpec:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise WorkflowValidationError(
            [WorkflowIssue(str(path), None, f"cannot read the file: {exc.strerror}",
                           "check the path")]
        ) from None
    return parse_workflow(text, source=str(path), default_name=path.stem)


def workflow_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted([*folder.glob("*.yaml"), *folder.glob("*.yml")])
