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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from kubetrain.api.base import Time, WireModel

MAX_REPORT_BYTES = 64 * 1024
"""The largest request body the status endpoints read (Trainer v2.3's ``maxBodySize``)."""
MAX_METRICS = 256
"""Metrics one report may carry (the CRDs' ``maxItems``, Trainer v2.3's)."""
MAX_METRIC_NAME = 128
MAX_METRIC_VALUE = 256
"""The longest metric name and value the ``kubeflow.org`` kinds store: Trainer v2.3's TrainJob stores at most
64 characters of each (``TRAINJOB_REPORT_LIMITS``); kubetrain's CRDs were made roomier first, and stay so."""
MAX_REMAINING_SECONDS = 2**31 - 1
"""Trainer v2's ``estimatedRemainingSeconds`` is an int32."""


@dataclass(frozen=True)
class ReportLimits:
    """What one kind's ``status.trainerStatus`` may hold (its CRD's bounds): a report beyond them is refused
    when it arrives (422) rather than accepted and then refused by the API server when it is written."""

    metrics: int = MAX_METRICS
    metric_name: int = MAX_METRIC_NAME
    metric_value: int = MAX_METRIC_VALUE


KUBEFLOW_REPORT_LIMITS = ReportLimits()
"""The ``kubeflow.org`` kinds' (kubetrain's CRDs)."""
TRAINJOB_REPORT_LIMITS = ReportLimits(metrics=256, metric_name=64, metric_value=64)
"""Trainer v2.3.0's TrainJob CRD (``manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml``)."""


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


@dataclass(frozen=True)
class Report:
    """A request body read as Trainer v2.3's status server reads it."""

    status: TrainerStatus | None
    """None when the body carries no ``trainerStatus``: Trainer v2.3 answers 200 and stores nothing."""
    ignored: tuple[str, ...] = ()
    """Fields the body had that a report has not: ignored, as Trainer v2.3's JSON decoder ignores them."""


def parse_report(body: bytes, received_at: datetime, limits: ReportLimits = KUBEFLOW_REPORT_LIMITS) -> Report:
    """The report in a request body, stamped with the time it was received.

    Whatever Trainer v2.3's server accepts is accepted: its decoder (Go's ``encoding/json``) reads the first
    JSON value of the body, matches field names without regard to case and ignores unknown fields, and a body
    without ``trainerStatus`` is a report of nothing. What it refuses is refused, naming the field. Beyond it,
    a whole-number float and a metric value sent as a bare number are taken, and ``lastUpdatedTime`` may be
    left out: the reporter's own is replaced anyway, because the deadline a job may go without reporting is
    measured on one clock, the substrate's, not on each pod's.
    """
    if len(body) > MAX_REPORT_BYTES:
        raise ReportError("", f"the body is {len(body)} bytes; a report may be at most {MAX_REPORT_BYTES}")
    try:
        text = body.decode("utf-8").lstrip(" \t\r\n")
        payload, _ = json.JSONDecoder().raw_decode(text)
    except (UnicodeDecodeError, ValueError) as error:
        raise ReportError("", f'the body is not JSON ({error}); send {{"trainerStatus": {{...}}}}') from None
    if payload is None:
        return Report(None)
    if not isinstance(payload, dict):
        raise ReportError("", 'the body must be a JSON object: {"trainerStatus": {...}}')
    ignored: list[str] = []
    top = _fields(payload, ("trainerStatus",), "", ignored)
    status = top.get("trainerStatus")
    if status is None:
        return Report(None, tuple(ignored))
    if not isinstance(status, dict):
        raise ReportError(
            "trainerStatus",
            "must be an object with progressPercentage, estimatedRemainingSeconds and/or metrics",
        )
    fields = _fields(status, _REPORT_FIELDS, "trainerStatus.", ignored)
    _check_time(fields.get("lastUpdatedTime"))
    parsed = TrainerStatus(
        progress_percentage=_whole_number(fields, "progressPercentage", 0, 100),
        estimated_remaining_seconds=_whole_number(
            fields, "estimatedRemainingSeconds", 0, MAX_REMAINING_SECONDS
        ),
        metrics=_metrics(fields.get("metrics"), limits, ignored),
        last_updated_time=received_at.astimezone(UTC),
    )
    return Report(parsed, tuple(ignored))


_REPORT_FIELDS = ("progressPercentage", "estimatedRemainingSeconds", "metrics", "lastUpdatedTime")


def _fields(obj: Mapping[str, Any], names: Sequence[str], where: str, ignored: list[str]) -> dict[str, Any]:
    """``obj``'s values by field name as Go's decoder matches them: an exact name, else one differing only in
    case; a later key for the same field wins. Other keys are added to ``ignored``."""
    by_fold = {name.casefold(): name for name in names}
    found: dict[str, Any] = {}
    for key, value in obj.items():
        name = key if key in names else by_fold.get(key.casefold())
        if name is None:
            ignored.append(f"{where}{key}")
        else:
            found[name] = value
    return found


def _check_time(value: object) -> None:
    if value is None:
        return
    path = "trainerStatus.lastUpdatedTime"
    try:
        parsed = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise ReportError(
            path, f'Invalid value: {json.dumps(value)}: must be an RFC 3339 time, e.g. "2026-11-26T10:00:00Z"'
        )


def _whole_number(fields: Mapping[str, Any], name: str, low: int, high: int) -> int | None:
    value = fields.get(name)
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


def _metrics(value: object, limits: ReportLimits, ignored: list[str]) -> list[Metric] | None:
    if value is None:
        return None
    path = "trainerStatus.metrics"
    if not isinstance(value, list):
        raise ReportError(path, 'must be a list of {"name": ..., "value": "..."} objects')
    if len(value) > limits.metrics:
        raise ReportError(path, f"Too many: {len(value)}: must have at most {limits.metrics} items")
    metrics: list[Metric] = []
    for position, item in enumerate(value):
        where = f"{path}[{position}]"
        if not isinstance(item, dict):
            raise ReportError(where, 'must be an object with "name" and "value"')
        fields = _fields(item, ("name", "value"), f"{where}.", ignored)
        name, metric_value = fields.get("name"), fields.get("value")
        if not isinstance(name, str) or not 0 < len(name) <= limits.metric_name:
            raise ReportError(f"{where}.name", f"must be a string of 1 to {limits.metric_name} characters")
        if isinstance(metric_value, bool) or not isinstance(metric_value, str | int | float):
            raise ReportError(f"{where}.value", "must be a string (Trainer v2 sends values as strings)")
        text = metric_value if isinstance(metric_value, str) else _number_text(metric_value)
        if not 0 < len(text) <= limits.metric_value:
            raise ReportError(f"{where}.value", f"must be a string of 1 to {limits.metric_value} characters")
        metrics.append(Metric(name=name, value=text))
    return metrics


def _number_text(value: float) -> str:
    """A number a reporter sent bare, as the string Trainer v2 stores (``repr`` keeps every digit)."""
    return repr(value) if isinstance(value, float) else str(value)


# --- the endpoint's routes -------------------------------------------------------------------------

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
    """The job ``path`` names, by its shape alone, or None when it is not a status path."""
    found = _STATUS_PATH.match(path)
    if found is None:
        return None
    return StatusTarget(
        f"{found['group']}/{found['version']}", found["namespace"], found["plural"], found["name"]
    )


@dataclass(frozen=True)
class StatusRoute:
    """One kind whose jobs report at ``/apis/<group>/<version>/namespaces/<ns>/<plural>/<name>/status``.

    Kubeflow Trainer v2.3 serves one, ``trainer.kubeflow.org/v1alpha1`` ``trainjobs``; kubetrain serves one
    per kind it runs, each from the same code."""

    group: str
    version: str
    plural: str
    limits: ReportLimits = KUBEFLOW_REPORT_LIMITS

    @classmethod
    def of(cls, api_version: str, plural: str, limits: ReportLimits = KUBEFLOW_REPORT_LIMITS) -> StatusRoute:
        group, _, version = api_version.rpartition("/")
        return cls(group, version, plural, limits)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    def target(self, namespace: str, name: str) -> StatusTarget:
        return StatusTarget(self.api_version, namespace, self.plural, name)

    @property
    def path_pattern(self) -> str:
        return f"/apis/{self.api_version}/namespaces/<namespace>/{self.plural}/<name>/status"


class StatusRoutes:
    """The kinds an endpoint serves: a path is a report's only when its group, version and plural are one
    of them (404 otherwise, as for any other path)."""

    def __init__(self, routes: Iterable[StatusRoute]) -> None:
        self._routes = {(r.api_version, r.plural): r for r in routes}

    def __iter__(self) -> Iterator[StatusRoute]:
        return iter(self._routes.values())

    def __len__(self) -> int:
        return len(self._routes)

    def route(self, target: StatusTarget) -> StatusRoute | None:
        return self._routes.get((target.api_version, target.plural))

    def match(self, path: str) -> tuple[StatusRoute, StatusTarget] | None:
        """The route and job of a status path, or None when it is not one these routes serve."""
        target = parse_status_path(path)
        route = self.route(target) if target is not None else None
        return None if route is None or target is None else (route, target)


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
