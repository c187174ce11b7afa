"""Traces exported as the OpenTelemetry SDK's standard ``OTEL_*`` variables say — and off unless
they ask for an exporter (docs/deployment.md, "Traces").

On when ``OTEL_TRACES_EXPORTER`` names one (``otlp``, ``console``; a comma-separated list), or,
with it unset, when an OTLP endpoint is set (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``). Off with ``OTEL_TRACES_EXPORTER=none``,
``OTEL_SDK_DISABLED=true``, or nothing set: the SDK's own default (``otlp`` when unset) would
send spans to ``localhost:4318`` on every machine that never asked for them. Everything else is
read by the SDK itself, as it documents: the OTLP exporter's endpoint, headers, timeout,
compression and certificates (``OTEL_EXPORTER_OTLP_*``), the sampler (``OTEL_TRACES_SAMPLER``,
``OTEL_TRACES_SAMPLER_ARG``), the batch processor (``OTEL_BSP_*``), span limits, and the
resource (``OTEL_SERVICE_NAME``, ``OTEL_RESOURCE_ATTRIBUTES``; the service name is
``commerce-api`` unless they name one). OTLP is sent as ``http/protobuf`` (the only protocol
installed); another ``OTEL_EXPORTER_OTLP_PROTOCOL`` is refused at start-up.

Each process (every granian worker, ``commerce-api worker``) has its own provider, made after the
fork, with a batch processor that exports from a thread of its own; :func:`stop` flushes it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from commerce_api import __version__
from commerce_api.core import tracing

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

SERVICE_NAME = "commerce-api"
OTLP_PROTOCOL = "http/protobuf"
EXPORTERS = ("otlp", "console")
_provider: TracerProvider | None = None


class TracingConfigError(ValueError):
    pass


def exporter_names(environ: Mapping[str, str]) -> list[str]:
    """The exporters the variables ask for (empty: tracing off)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    named = environ.get("OTEL_TRACES_EXPORTER", "").strip()
    if not named:
        endpoints = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        return ["otlp"] if any(environ.get(name, "").strip() for name in endpoints) else []
    names = [name.strip().lower() for name in named.split(",") if name.strip()]
    if "none" in names:
        return []
    unknown = sorted(set(names) - set(EXPORTERS))
    if unknown:
        raise TracingConfigError(
            f"OTEL_TRACES_EXPORTER names {', '.join(unknown)}: use otlp, console or none"
        )
    if "otlp" in names:
        protocol = environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get(
            "OTEL_EXPORTER_OTLP_PROTOCOL", OTLP_PROTOCOL
        )
        if protocol.strip() != OTLP_PROTOCOL:
            raise TracingConfigError(
                f"OTLP protocol {protocol!r} is not installed: set "
                f"OTEL_EXPORTER_OTLP_PROTOCOL={OTLP_PROTOCOL} (a collector accepts it on 4318)"
            )
    return list(dict.fromkeys(names))


def _exporter(name: str) -> SpanExporter:
    if name == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter()  # endpoint, headers, timeout, …: from OTEL_EXPORTER_OTLP_*
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter

    return ConsoleSpanExporter()


def start(environ: Mapping[str, str] | None = None) -> bool:
    """Turn tracing on if the ``OTEL_*`` variables ask for it (and it is not on already);
    whether this call turned it on (then :func:`stop` it at shutdown). ``environ`` decides
    whether (``exporter_names``); the SDK reads the rest from ``os.environ``."""
    if tracing.ENABLED:
        return False
    names = exporter_names(os.environ if environ is None else environ)
    if not names:
        return False
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = _new_provider()
    for name in names:
        provider.add_span_processor(BatchSpanProcessor(_exporter(name)))
    _use(provider)
    return True


def install(exporter: SpanExporter) -> TracerProvider:
    """Turn tracing on with ``exporter``, each span handed to it as it ends (a test's
    ``InMemorySpanExporter``); :func:`stop` turns it off."""
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    provider = _new_provider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _use(provider)
    return provider


def provider() -> TracerProvider | None:
    """The tracer provider in use, or None (tracing off)."""
    return _provider


def stop() -> None:
    """Turn tracing off, exporting what is left."""
    global _provider
    tracing.disable()
    if _provider is not None:
        _provider.shutdown()
        _provider = None


def _new_provider() -> TracerProvider:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider

    resource = Resource.create({"service.version": __version__})
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": SERVICE_NAME}))
    return TracerProvider(resource=resource)  # the sampler from OTEL_TRACES_SAMPLER


def _use(provider: TracerProvider) -> None:
    global _provider
    if _provider is not None:
        _provider.shutdown()
    _provider = provider
    tracing.enable(provider)
