"""Build the tracing hook from `telemetry:` settings.

`exporter: none` builds nothing: no hook is registered, so a run pays nothing for tracing.
`console` prints finished spans to stderr (stdout belongs to the CLI's output); `otlp` sends
them in batches over OTLP/HTTP, configured by the standard `OTEL_EXPORTER_OTLP_*` variables
(`OTEL_EXPORTER_OTLP_ENDPOINT`, default http://localhost:4318). The service name is
`OTEL_SERVICE_NAME` when set, else `telemetry.service_name`. The provider is private to
artifactflow (the global one is left alone for the application to own) and is flushed and
shut down when the controller closes.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from ..errors import ConfigError
from ..settings.hooks import TelemetrySettings
from .tracing import TracingHooks


def tracer_provider(settings: TelemetrySettings, exporter: Any = None) -> Any:
    """An SDK `TracerProvider` with the configured exporter (or the one given)."""
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

    attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": settings.service_name}
    provider = TracerProvider(resource=Resource.create(attributes))
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    elif settings.exporter == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
    elif settings.exporter == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise ConfigError(
                "telemetry.exporter is 'otlp' but the OTLP exporter is not installed; "
                "install it with: pip install 'artifactflow[otlp]'"
            ) from None
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


def tracing_from_settings(settings: TelemetrySettings) -> TracingHooks | None:
    """The tracing hook for these settings, or None when telemetry is off."""
    if settings.exporter == "none":
        return None
    return TracingHooks(
        tracer_provider(settings), capture_content=settings.capture_content or None, owns_provider=True
    )
