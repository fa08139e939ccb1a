"""Progress and metrics a training job reports about itself: ``status.trainerStatus`` and its history.

The shape and names are Kubeflow Trainer v2's (KEP-2779, ``TrainJobTrainerStatus``), so code instrumented
for Trainer v2 reports to kubetrain unchanged: a percentage, an estimate of the seconds left, the latest
metrics as name/value strings, and when the report arrived. Reports reach a substrate's status endpoint as
``{"trainerStatus": {...}}``; :func:`parse_report` turns a request body into a ``TrainerStatus`` or a
``ReportError`` naming the field at fault.

Beyond Trainer v2, which keeps only the latest values, every job keeps a bounded history of its reports
(:class:`ProgressHistory`), enough to draw its loss curve over its whole life.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubetrain.api.base import Time, WireModel

MAX_REPORT_BYTES = 64 * 1024
"""The largest request body the status endpoints read: a report is a few hundred bytes."""
MAX_METRICS = 64
"""Metrics one report may carry (the CRD's ``maxItems``)."""
MAX_METRIC_NAME = 128
MAX_METRIC_VALUE = 256
MAX_REMAINING_SECONDS = 2**31 - 1
"""Trainer v2's ``estimatedRemainingSeconds`` is an int32."""


class Metric(WireModel):
    name: str
    """A user-defined label for the metric, e.g. ``loss`` or ``eval_accuracy``."""
    value: str
    """The metric's value, as a string."""


class TrainerStatus(WireModel):
    """What the training processes last reported (Kubeflow Trainer v2's ``trainerStatus``)."""

    progress_percentage: int | None = None
    """How complete the training is, 0 to 100; empty if unknown."""
    estimated_remaining_seconds: int | None = None
    """Estimated seconds of training left, as of ``lastUpdatedTime``; empty if unknown."""
    metrics: list[Metric] | None = None
    """The latest metrics, e.g. loss and accuracy, as name/value strings."""
    last_updated_time: Time | None = None
    """When the endpoint received this report (the operator's clock, not the reporter's)."""

    def metric(self, name: str) -> str | None:
        return next((m.value for m in self.metrics or () if m.name == name), None)


# --- reports ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReportError(ValueError):
    """A report the endpoint refuses; ``field`` is the payload path at fault."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


def parse_report(body: bytes, received_at: datetime) -> TrainerStatus:
    """The ``trainerStatus`` of a report's JSON body, stamped with the time it was received.

    The reporter's own ``lastUpdatedTime``, if it sent one, is replaced: the deadline a job may go without
    reporting is measured on one clock, the substrate's, not on each pod's.
    """
    if len(body) > MAX_REPORT_BYTES:
        raise ReportError("", f"the body is {len(body)} bytes; a report may be at most {MAX_REPORT_BYTES}")
    try:
        payload = json.loads(body)
    except (UnicodeDecodeError, ValueError) as error:
        raise ReportError("", f'the body is not JSON ({error}); send {{"trainerStatus": {{...}}}}') from None
    if not isinstance(payload, dict):
        raise ReportError("", 'the body must be a JSON object: {"trainerStatus": {...}}')
    unknown = sorted(str(key) for key in payload if key != "trainerStatus")
    if unknown:
        raise ReportError(unknown[0], "unknown field; a report has one field, trainerStatus")
    status = payload.get("trainerStatus")
    if not isinstance(status, dict):
        raise ReportError(
            "trainerStatus",
            "Required value: an object with progressPercentage, estimatedRemainingSeconds and/or metrics",
        )
    unknown = sorted(str(key) for key in status if key not in _REPORT_FIELDS)
    if unknown:
        valid = ", ".join(_REPORT_FIELDS)
        raise ReportError(f"trainerStatus.{unknown[0]}", f"unknown field; valid fields are: {valid}")
    return TrainerStatus(
        progress_percentage=_whole_number(status, "progressPercentage", 0, 100),
        estimated_remaining_seconds=_whole_number(
            status, "estimatedRemainingSeconds", 0, MAX_REMAINING_SECONDS
        ),
        metrics=_metrics(status.get("metrics")),
        last_updated_time=received_at.astimezone(UTC),
    )


_REPORT_FIELDS = ("progressPercentage", "estimatedRemainingSeconds", "metrics", "lastUpdatedTime")


def _whole_number(status: Mapping[str, Any], name: str, low: int, high: int) -> int | None:
    value = status.get(name)
    if value is None:
        return None
    path = f"trainerStatus.{name}"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ReportError(path, f"Invalid value: {json.dumps(value)}: must be a whole number")
    if not low <= value <= high:
        raise ReportError(path, f"Invalid value: {value}: must be between {low} and {high}")
    return value


def _metrics(value: object) -> list[Metric] | None:
    if value is None:
        return None
    path = "trainerStatus.metrics"
    if not isinstance(value, list):
        raise ReportError(path, 'must be a list of {"name": ..., "value": "..."} objects')
    if len(value) > MAX_METRICS:
        raise ReportError(path, f"Too many: {len(value)}: must have at most {MAX_METRICS} items")
    metrics: list[Metric] = []
    seen: set[str] = set()
    for position, item in enumerate(value):
        where = f"{path}[{position}]"
        if not isinstance(item, dict) or set(item) - {"name", "value"}:
            raise ReportError(where, 'must be an object with exactly "name" and "value"')
        name, metric_value = item.get("name"), item.get("value")
        if not isinstance(name, str) or not 0 < len(name) <= MAX_METRIC_NAME:
            raise ReportError(f"{where}.name", f"must be a string of 1 to {MAX_METRIC_NAME} characters")
        if name in seen:
            raise ReportError(f"{where}.name", f"Duplicate value: {json.dumps(name)}")
        if isinstance(metric_value, bool) or not isinstance(metric_value, str | int | float):
            raise ReportError(f"{where}.value", "must be a string (Trainer v2 sends values as strings)")
        text = metric_value if isinstance(metric_value, str) else _number_text(metric_value)
        if not 0 < len(text) <= MAX_METRIC_VALUE:
            raise ReportError(f"{where}.value", f"must be a string of 1 to {MAX_METRIC_VALUE} characters")
        seen.add(name)
        metrics.append(Metric(name=name, value=text))
    return metrics


def _number_text(value: float) -> str:
    """A number a reporter sent bare, as the string Trainer v2 stores (``repr`` keeps every digit)."""
    return repr(value) if isinstance(value, float) else str(value)


# --- the endpoint's path ---------------------------------------------------------------------------

_STATUS_PATH = re.compile(
    r"^/apis/(?P<group>[a-z0-9.-]+)/(?P<version>[a-z0-9]+)/namespaces/(?P<namespace>[a-z0-9.-]+)"
    r"/(?P<plural>[a-z0-9]+)/(?P<name>[a-z0-9.-]+)/status$"
)


@dataclass(frozen=True)
class StatusTarget:
    """The job a report is for: ``POST /apis/<group>/<version>/namespaces/<ns>/<plural>/<name>/status``."""

    api_version: str
    """``<group>/<version>``, e.g. ``kubeflow.org/v1``."""
    namespace: str
    plural: str
    name: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def path(self) -> str:
        return f"/apis/{self.api_version}/namespaces/{self.namespace}/{self.plural}/{self.name}/status"


def parse_status_path(path: str) -> StatusTarget | None:
    """The report's job, or None when ``path`` is not a job's status path."""
    found = _STATUS_PATH.match(path)
    if found is None:
        return None
    return StatusTarget(
        f"{found['group']}/{found['version']}", found["namespace"], found["plural"], found["name"]
    )


# --- history ---------------------------------------------------------------------------------------

MAX_HISTORY_POINTS = 512
"""Points a history keeps over a job's whole life: a curve 512 points wide, whatever the job's length."""
MAX_HISTORY_METRICS = 16
"""Metric names a history follows (the first reported): what a chart can show."""


@dataclass(frozen=True)
class ProgressPoint:
    at: float
    """Unix seconds of the report."""
    progress: int | None
    metrics: Mapping[str, float]
    """The report's metrics whose values are numbers."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"t": round(self.at, 3), "m": dict(self.metrics)}
        if self.progress is not None:
            data["p"] = self.progress
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProgressPoint:
        metrics = data.get("m")
        return cls(
            at=float(data.get("t", 0.0)),
            progress=_int_or_none(data.get("p")),
            metrics={
                str(k): float(v)
                for k, v in (metrics.items() if isinstance(metrics, Mapping) else ())
                if isinstance(v, int | float) and not isinstance(v, bool)
            },
        )


@dataclass
class ProgressHistory:
    """A job's reports over its whole life, thinned to at most ``limit`` points.

    Points are kept at least ``interval`` seconds apart; a report sooner than that after the last kept point
    replaces it, so the latest report is always the last point. When the history is full the interval
    doubles and the kept points are thinned to it: resolution halves, coverage stays the whole life, and the
    size never exceeds ``limit`` points of ``MAX_HISTORY_METRICS`` metrics (a few hundred kilobytes at most,
    well inside a ConfigMap's 1 MiB).
    """

    points: list[ProgressPoint] = field(default_factory=list)
    interval: float = 0.0
    limit: int = MAX_HISTORY_POINTS

    def add(self, status: TrainerStatus) -> None:
        at = (status.last_updated_time or datetime.now(UTC)).timestamp()
        point = ProgressPoint(at, status.progress_percentage, self._numeric(status))
        if self.points and at < self.points[-1].at:
            return  # older than the newest point kept (a delayed report another replica had)
        self._append_point(point)

    def _numeric(self, status: TrainerStatus) -> dict[str, float]:
        followed = set(self.metric_names())
        found: dict[str, float] = {}
        for metric in status.metrics or ():
            number = _number(metric.value)
            if number is None:
                continue
            if metric.name in followed or len(followed) < MAX_HISTORY_METRICS:
                followed.add(metric.name)
                found[metric.name] = number
        return found

    def _thin(self) -> None:
        span = self.points[-1].at - self.points[0].at
        self.interval = max(self.interval * 2, span / self.limit * 2, 1e-3)
        kept = [self.points[0]]
        for point in self.points[1:-1]:
            if point.at - kept[-1].at >= self.interval:
                kept.append(point)
        kept.append(self.points[-1])
        self.points = kept

    def metric_names(self) -> list[str]:
        names: dict[str, None] = {}
        for point in self.points:
            names.update(dict.fromkeys(point.metrics))
        return list(names)

    def merge(self, other: ProgressHistory) -> None:
        """Points another writer kept (another operator replica) folded in, in time order."""
        combined = sorted({p.at: p for p in [*self.points, *other.points]}.values(), key=lambda p: p.at)
        self.points = []
        self.interval = max(self.interval, other.interval)
        for point in combined:
            self._append_point(point)

    def _append_point(self, point: ProgressPoint) -> None:
        if len(self.points) >= 2 and point.at - self.points[-2].at < self.interval:
            self.points[-1] = point
        else:
            self.points.append(point)
            if len(self.points) > self.limit:
                self._thin()

    def to_json(self) -> dict[str, Any]:
        return {"interval": self.interval, "points": [p.to_json() for p in self.points]}

    @classmethod
    def from_json(cls, data: object) -> ProgressHistory:
        """A history as stored; anything unreadable reads as empty (a history is never worth an error)."""
        if not isinstance(data, Mapping):
            return cls()
        raw_points = data.get("points")
        points = [
            ProgressPoint.from_json(p)
            for p in (raw_points if isinstance(raw_points, Sequence) else ())
            if isinstance(p, Mapping)
        ]
        interval = data.get("interval")
        history = cls(interval=float(interval) if isinstance(interval, int | float) else 0.0)
        for point in sorted(points, key=lambda p: p.at):
            history._append_point(point)
        return history


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _int_or_none(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None
