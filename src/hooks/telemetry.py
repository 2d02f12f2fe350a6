"""Build the tracing hook from `telemetry:` settings."""

from __future__ import annotations

from typing import Any

from .config import TelemetrySettings


def tracing_from_settings(settings: TelemetrySettings) -> Any:
    """None when telemetry is off."""
    if settings.exporter == "none":
        return None
    raise NotImplementedError(settings.exporter)
