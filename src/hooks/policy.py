"""A hook that refuses tool calls by policy: which tools, and which argument values.

    tool_policy:
      deny_tools: [shell, "*_artifact"]      # shell-style wildcards
      allow_tools: null                      # a list: only these tools may run
      rules:
        - tool: web_fetch
          argument: url_list                 # dotted path into the arguments; a list:
                                             # every item must pass
          domains: [python.org]              # the host or any subdomain of it
          allow: []                          # or regexes (re.search) the value must match
          deny: ['\\.zip$']                  # regexes that refuse the call
          reason: only python.org may be fetched

A refused call never runs and nobody is asked to approve it: the model reads the reason as
the call's error and can change course. `domains` parses the URL (so
`https://python.org@evil.example/` is evil.example, and `evilpython.org` is not
python.org); values without a scheme are read as host names.
"""

from __future__ import annotations

import json
import re
from fnmatch import fnmatchcase
from typing import Any
from urllib.parse import urlsplit

from ..settings.hooks import ToolPolicySettings, ToolRule
from .base import Hooks
from .types import Refuse, RunInfo, ToolCall

_MISSING = object()


def host_of(value: str) -> str | None:
    text = value.strip()
    try:
        parts = urlsplit(text if "//" in text else f"//{text}")
        host = parts.hostname
    except ValueError:
        return None
    return host.rstrip(".").lower() if host else None


def in_domains(host: str | None, domains: list[str]) -> bool:
    if not host:
        return False
    for domain in domains:
        domain = domain.strip().lstrip(".").rstrip(".").lower()
        if host == domain or host.endswith("." + domain):
            return True
    return False


def _lookup(arguments: dict[str, Any], path: str) -> Any:
    value: Any = arguments
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return _MISSING
        value = value[part]
    return value


class ToolPolicyHooks(Hooks):
    name = "tool_policy"

    def __init__(self, settings: ToolPolicySettings | dict[str, Any]) -> None:
        self.settings = (
            settings if isinstance(settings, ToolPolicySettings) else ToolPolicySettings.model_validate(settings)
        )
        self._rules = [
            (rule, [re.compile(p) for p in rule.allow], [re.compile(p) for p in rule.deny])
            for rule in self.settings.rules
        ]

    def check(self, call: ToolCall) -> str | None:
        """Why the call is refused, or None when the policy lets it through."""
        cfg = self.settings
        if any(fnmatchcase(call.name, p) for p in cfg.deny_tools):
            return f"the tool '{call.name}' is not allowed by policy"
        if cfg.allow_tools is not None and not any(fnmatchcase(call.name, p) for p in cfg.allow_tools):
            allowed = ", ".join(cfg.allow_tools) or "none"
            return f"the tool '{call.name}' is not allowed by policy (allowed: {allowed})"
        for rule, allow, deny in self._rules:
            if not fnmatchcase(call.name, rule.tool):
                continue
            value = _lookup(call.arguments, rule.argument)
            if value is _MISSING or value is None:
                continue
            for item in value if isinstance(value, list) else [value]:
                reason = self._check_value(rule, allow, deny, item)
                if reason:
                    return reason
        return None

    def _check_value(self, rule: ToolRule, allow: list[re.Pattern[str]], deny: list[re.Pattern[str]], value: Any) -> str | None:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        if any(p.search(text) for p in deny):
            return self._reason(rule, f"{rule.argument} {text!r} matches a denied pattern")
        if (allow or rule.domains) and not (
            any(p.search(text) for p in allow) or in_domains(host_of(text), rule.domains)
        ):
            where = ", ".join(rule.domains) if rule.domains else "the allowed patterns"
            return self._reason(rule, f"{rule.argument} {text!r} is outside {where}")
        return None

    @staticmethod
    def _reason(rule: ToolRule, default: str) -> str:
        return f"{rule.reason} ({default})" if rule.reason else default

    async def before_tool_call(self, run: RunInfo, call: ToolCall) -> Refuse | None:
        reason = self.check(call)
        return Refuse(reason) if reason else None
