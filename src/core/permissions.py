"""Resume decisions: one format for Python, CLI and HTTP, validated before anything runs.

```
"approve" | "deny" | "always"
| {TOOL_CALL_ID: "approve" | "deny" | "always"
                 | {"action": "approve" | "deny" | "edit" | "always",
                    "reason": "...", "arguments": {...}}}
```
This is `Resume.decisions` and `Run.respond(decisions)` in Python; the HTTP body and the old
controller take it under a `"decisions"` key (`decisions_from_body`). A plain string answers every pending call. A mapping must answer every pending call and
nothing else. `edit` arguments are validated against the tool's schema here, at resume time,
so an invalid edit is refused while the run stays paused.
"""

from __future__ import annotations

from typing import Any, cast

from ..errors import InvalidResumeError
from ..shapes import AskedCall, Decision, DecisionActionName
from ..tools.registry import ToolRegistry, validate_arguments

ACTIONS = ("approve", "deny", "edit", "always")
PLAIN = ("approve", "deny", "always")


def decisions_from_body(resume_data: Any) -> Any:
    """The decisions inside a resume body `{"decisions": ...}` (HTTP, CLI, the old controller)."""
    if not isinstance(resume_data, dict) or "decisions" not in resume_data:
        raise InvalidResumeError(
            'resume data must be an object with a "decisions" key, e.g. {"decisions": "approve"}'
        )
    extra_keys = set(resume_data) - {"decisions"}
    if extra_keys:
        raise InvalidResumeError(f"unexpected keys in resume data: {', '.join(sorted(extra_keys))}")
    return resume_data["decisions"]


def normalize_decisions(
    decisions: Any, pending: list[AskedCall], registry: ToolRegistry
) -> dict[str, Decision]:
    """Validate `decisions` against the pending calls; return decisions keyed by call id."""
    ids = [c["tool_call_id"] for c in pending]
    by_id = {c["tool_call_id"]: c for c in pending}
    if isinstance(decisions, str):
        if decisions not in PLAIN:
            raise InvalidResumeError(
                f"decisions must be one of {', '.join(PLAIN)} or a mapping of tool-call ids; "
                f"got {decisions!r}"
            )
        return {call_id: {"action": decisions, "reason": None} for call_id in ids}
    if not isinstance(decisions, dict):
        raise InvalidResumeError("decisions must be a string or an object keyed by tool-call id")
    missing = [i for i in ids if i not in decisions]
    unknown = [k for k in decisions if k not in by_id]
    if missing or unknown:
        parts = []
        if missing:
            parts.append(f"missing decisions for {', '.join(missing)}")
        if unknown:
            parts.append(f"no pending call with id {', '.join(map(str, unknown))}")
        raise InvalidResumeError(
            "; ".join(parts) + f". Pending calls: {', '.join(ids)}"
        )
    out: dict[str, Decision] = {}
    for call_id in ids:
        raw = decisions[call_id]
        if isinstance(raw, str):
            raw = {"action": raw}
        if not isinstance(raw, dict):
            raise InvalidResumeError(f"decision for {call_id} must be an object with an 'action'")
        bad = set(raw) - {"action", "reason", "arguments"}
        if bad:
            raise InvalidResumeError(f"decision for {call_id}: unexpected keys {', '.join(sorted(bad))}")
        action = raw.get("action")
        if action not in ACTIONS:
            raise InvalidResumeError(
                f"decision for {call_id}: action must be one of {', '.join(ACTIONS)}, got {action!r}"
            )
        reason = raw.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise InvalidResumeError(f"decision for {call_id}: reason must be a string")
        decision: Decision = {"action": cast(DecisionActionName, action), "reason": reason}
        if action == "edit":
            arguments = raw.get("arguments")
            if not isinstance(arguments, dict):
                raise InvalidResumeError(
                    f"decision for {call_id}: edit needs 'arguments' as an object"
                )
            tool = registry.get(by_id[call_id]["tool"])
            if tool is None:
                raise InvalidResumeError(f"decision for {call_id}: tool is no longer available")
            validated, error = validate_arguments(tool, arguments)
            if error is not None:
                raise InvalidResumeError(f"decision for {call_id}: {error}")
            decision["arguments"] = arguments
        elif raw.get("arguments") is not None:
            raise InvalidResumeError(
                f"decision for {call_id}: 'arguments' is only allowed with action 'edit'"
            )
        out[call_id] = decision
    return out
