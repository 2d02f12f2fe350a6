"""Settings of the agent platform (issue 35): webhooks a run calls when it ends, and the cron
scheduler (`protocol/webhooks.py`, `protocol/crons.py`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class WebhookSettings(BaseModel):
    """`webhooks:` in artifactflow.yaml. `secret`: when set, each delivery carries
    `X-Artifactflow-Signature: sha256=<hex HMAC of the body>`. `allow_private`: deliver to
    loopback and private-network addresses too (refused by default, as `web_fetch` refuses them)."""

    model_config = ConfigDict(extra="forbid")

    secret: str | None = None
    allow_private: bool = False
    timeout_seconds: float = Field(default=10.0, gt=0)
    max_attempts: int = Field(default=5, ge=1, le=20)
    backoff_seconds: float = Field(default=1.0, ge=0)  # doubled after each failed attempt


class CronSettings(BaseModel):
    """`crons:` in artifactflow.yaml: how often a server looks for due crons (every worker
    looks; a compare-and-set on the next due time lets one of them start each tick)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    poll_seconds: float = Field(default=5.0, gt=0)


class StoreTTLSettings(BaseModel):
    """`store_ttl:` in artifactflow.yaml: how often a server deletes the store items whose TTL
    has run out (a read never returns an expired item, whatever this is)."""

    model_config = ConfigDict(extra="forbid")

    sweep_seconds: float = Field(default=60.0, gt=0)
