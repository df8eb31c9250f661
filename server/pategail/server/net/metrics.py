"""The service's figures in the Prometheus text exposition format (version 0.0.4), for ``GET /metrics``.

A metric is a :class:`Metric` — name, type, help and samples (label set → value); :func:`exposition` writes
them. Names follow Prometheus' conventions: a ``pategail_`` prefix, base units (seconds, bytes), ``_total``
on counters.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class Metric:
    name: str
    kind: str                         # "gauge", "counter" or "summary"
    help: str
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)
    """(name suffix, labels, value): suffix "" for the metric itself, "_count"/"_sum" for a summary's."""

    def add(self, value: float | None, suffix: str = "", **labels: str) -> "Metric":
        if value is not None:
            self.samples.append((suffix, labels, float(value)))
        return self


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(int(value)) if value == int(value) and abs(value) < 1e15 else repr(value)


def exposition(metrics: list[Metric]) -> str:
    lines = []
    for m in metrics:
        lines.append(f"# HELP {m.name} {m.help}")
        lines.append(f"# TYPE {m.name} {m.kind}")
        for suffix, labels, value in m.samples:
            label_text = ",".join(f'{k}="{_escape(str(v))}"' for k, v in labels.items())
            lines.append(f"{m.name}{suffix}{{{label_text}}} {_number(value)}" if labels
                         else f"{m.name}{suffix} {_number(value)}")
    return "\n".join(lines) + "\n"


def service_metrics(status: dict, traffic, hub_activity: dict, connections_open: int,
                    connections_refused: int, requests_refused: int) -> list[Metric]:
    """The service's metrics from its status board (``status``), its :class:`Traffic`, the hub's
    per-device activity and its connection counts."""
    missed = sum(a.missed for a in hub_activity.values())
    answered = sum(a.answered for a in hub_activity.values())
    metrics = [
        Metric("pategail_round", "gauge", "Rounds completed.").add(status.get("round")),
        Metric("pategail_rounds", "gauge", "Rounds the run is configured for.").add(status.get("rounds")),
        Metric("pategail_devices_enrolled", "gauge", "Devices enrolled.").add(status.get("devices_enrolled")),
        Metric("pategail_devices", "gauge", "The run's devices (fixed when training starts).").add(
            status.get("devices")),
        Metric("pategail_participants", "gauge", "Devices that took part in the last release.").add(
            status.get("participants")),
        Metric("pategail_epsilon_spent", "gauge", "Privacy spent so far (composed epsilon).").add(
            status.get("epsilon")),
        Metric("pategail_epsilon_target", "gauge", "The run's privacy budget (epsilon).").add(
            status.get("target_epsilon")),
        Metric("pategail_orders_answered_total", "counter", "Orders devices answered.").add(answered),
        Metric("pategail_dropouts_total", "counter", "Orders devices let pass their deadline.").add(missed),
        Metric("pategail_requests_total", "counter", "HTTP requests handled.").add(traffic.requests),
        Metric("pategail_requests_refused_total", "counter", "HTTP requests refused (4xx).").add(requests_refused),
        Metric("pategail_received_bytes_total", "counter", "HTTP bytes received (lines, headers, bodies).").add(
            traffic.bytes_in),
        Metric("pategail_sent_bytes_total", "counter", "HTTP bytes sent (lines, headers, bodies).").add(
            traffic.bytes_out),
        Metric("pategail_connections_open", "gauge", "Open connections.").add(connections_open),
        Metric("pategail_connections_refused_total", "counter",
               "Connections closed at once: their address held its limit.").add(connections_refused),
    ]
    latency = Metric("pategail_request_duration_seconds", "summary",
                     "Time to handle a request by route (a poll's wait for work excluded; quantiles over the "
                     "newest samples).")
    import numpy as np
    for route, samples in sorted(traffic.latency_s.items()):
        values = np.fromiter(samples, float, len(samples))
        for q in (0.5, 0.99):
            latency.add(float(np.quantile(values, q)), route=route, quantile=str(q))
        latency.add(samples.count, "_count", route=route).add(samples.total, "_sum", route=route)
    metrics.append(latency)
    return metrics
