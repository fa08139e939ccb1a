"""What two operators made of the same job, compared field by field, and the differences allowed on purpose.

The conformance tier (``tests/peers``) runs each case under a peer operator and under kubetrain, collects a
*snapshot* of each (the job's children, its status and its events, see ``Snapshot``), normalises away what
differs for reasons nobody controls (uids, resourceVersions, times, the namespace's name, the random part of
a generated name, an SSH key's bytes) and compares the rest leaf by leaf. Every remaining difference must be
allowed by one entry of the allow-list, a table in docs/migration.md whose rows say which peer, case, object
and field, and why; the tier prints the entries it applied.

Pure: JSON in, differences out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Json = Any

DROPPED_METADATA = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "selfLink",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
)
"""Set by the API server, different on every run."""

SET = "<set>"
"""A time that is present (its value is a clock's)."""


class _Absent:
    def __repr__(self) -> str:
        return "<absent>"


ABSENT: Any = _Absent()
"""A field or object one side has and the other has not."""
WHOLE = "(the object)"
"""The field of a difference that is a whole object, on one side only."""


# --- paths -------------------------------------------------------------------------------------------------


def _keyed_by_name(items: Sequence[Json]) -> bool:
    names = [item.get("name") if isinstance(item, dict) else None for item in items]
    return bool(items) and all(isinstance(n, str) for n in names) and len(set(names)) == len(names)


def field_paths(value: Json, prefix: str = "") -> dict[str, Json]:
    """Every leaf of ``value`` by its path: ``spec.containers[pytorch].env[MASTER_ADDR].value``.

    A list of maps that each have a distinct ``name`` is keyed by name (containers, env, volumes, ports), so a
    variable added in the middle is one difference, not a shift of every index after it; other lists by
    index. An empty map or list is a leaf itself."""
    if isinstance(value, dict) and value:
        paths: dict[str, Json] = {}
        for key, item in value.items():
            paths.update(field_paths(item, f"{prefix}.{key}" if prefix else str(key)))
        return paths
    if isinstance(value, list) and value:
        paths = {}
        by_name = _keyed_by_name(value)
        for index, item in enumerate(value):
            paths.update(field_paths(item, f"{prefix}[{item['name'] if by_name else index}]"))
        return paths
    return {prefix: value}


# --- differences -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Difference:
    case: str
    object: str
    """``Pod pi-worker-0``, ``PyTorchJob simple``, ``Event PyTorchJob/simple ExitedWithCode: ...``."""
    field: str
    """The leaf's path; ``WHOLE`` when the object is on one side only."""
    peer: Json
    kubetrain: Json

    def __str__(self) -> str:
        where = f"{self.object} {self.field}".strip()
        return f"{self.case}: {where}: peer {_short(self.peer)}, kubetrain {_short(self.kubetrain)}"


def _short(value: Json, limit: int = 160) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class Comparison:
    objects: int = 0
    """Objects compared (each one once, whichever side has it)."""
    fields: int = 0
    """Leaves compared over all objects."""
    differences: list[Difference] = field(default_factory=list)

    def add(self, other: Comparison) -> None:
        self.objects += other.objects
        self.fields += other.fields
        self.differences.extend(other.differences)


def compare(case: str, peer: Mapping[str, Json], kubetrain: Mapping[str, Json]) -> Comparison:
    """Objects by name on each side (``Snapshot.objects``), compared leaf by leaf."""
    result = Comparison()
    for name in sorted(set(peer) | set(kubetrain)):
        result.objects += 1
        if name not in peer or name not in kubetrain:
            result.fields += len(field_paths(peer.get(name, kubetrain.get(name))))
            result.differences.append(
                Difference(case, name, WHOLE, peer.get(name, ABSENT), kubetrain.get(name, ABSENT))
            )
            continue
        left, right = field_paths(peer[name]), field_paths(kubetrain[name])
        for path in sorted(set(left) | set(right)):
            result.fields += 1
            a, b = left.get(path, ABSENT), right.get(path, ABSENT)
            if a is ABSENT or b is ABSENT or a != b:
                result.differences.append(Difference(case, name, path, a, b))
    return result


PAST_THE_SPAM_FILTER = "past the peer's first 25 events"
"""Appended to the field of an event difference a peer's dropped events explain: an event it lacks, or a
smaller count. client-go's recorder sends the first 25 events about an object, then one every five minutes;
the rest it only logs."""


def recorded_events(objects: Mapping[str, Json]) -> int:
    """How many events (repeats included) a snapshot holds."""
    return sum(int(v.get("count") or 0) for k, v in objects.items() if k.startswith("Event "))


def mark_spam_filtered(comparison: Comparison) -> Comparison:
    """The comparison of a case whose peer dropped events, with the differences that may explain marked so:
    the peer lacks the event, or counted fewer."""
    marked = []
    for d in comparison.differences:
        fewer = d.field == "count" and isinstance(d.peer, int) and isinstance(d.kubetrain, int)
        lacking = d.field == WHOLE and d.peer is ABSENT
        if d.object.startswith("Event ") and (lacking or (fewer and d.peer < d.kubetrain)):
            d = Difference(d.case, d.object, f"{d.field} {PAST_THE_SPAM_FILTER}", d.peer, d.kubetrain)
        marked.append(d)
    return Comparison(comparison.objects, comparison.fields, marked)


# --- the allow-list ----------------------------------------------------------------------------------------


def glob(pattern: str) -> re.Pattern[str]:
    """``*`` matches anything (brackets and dots are literal: they are in field paths)."""
    return re.compile("^" + ".*".join(re.escape(part) for part in pattern.split("*")) + "$", re.DOTALL)


@dataclass(frozen=True)
class Allowance:
    """One row of the allow-list: differences it covers and why they are allowed."""

    peer: str
    """``training-operator``, ``mpi-operator`` or ``*``."""
    case: str
    object: str
    field: str
    why: str

    def allows(self, peer: str, difference: Difference) -> bool:
        return (
            glob(self.peer).match(peer) is not None
            and glob(self.case).match(difference.case) is not None
            and glob(self.object).match(difference.object) is not None
            and glob(self.field).match(difference.field) is not None
        )

    def __str__(self) -> str:
        return f"{self.peer} | {self.case} | {self.object} | {self.field}: {self.why}"


class AllowListError(ValueError):
    """The allow-list's table is missing or malformed; the message names the line."""


ALLOW_LIST_COLUMNS = ("peer", "case", "object", "field", "why")


def _cell(text: str) -> str:
    text = text.strip()
    if len(text) >= 2 and text.startswith("`") and text.endswith("`"):
        return text[1:-1]
    return text


def parse_allow_list(markdown: str, heading: str) -> list[Allowance]:
    """The rows of the first table after the line ``heading`` (a Markdown heading, matched exactly).

    Its header must be ``| peer | case | object | field | why |``; a cell in backticks is taken without
    them (so ``*`` and brackets render as written)."""
    lines = markdown.splitlines()
    try:
        start = lines.index(heading)
    except ValueError:
        raise AllowListError(f"no line {heading!r}") from None
    rows = []
    table_started = False
    for number, line in enumerate(lines[start + 1 :], start + 2):
        if line.startswith("#"):
            break
        if not line.startswith("|"):
            if table_started:
                break
            continue
        cells = [_cell(c) for c in line.strip().strip("|").split("|")]
        if not table_started:
            if tuple(c.lower() for c in cells) != ALLOW_LIST_COLUMNS:
                raise AllowListError(
                    f"line {number}: the table's header must be {ALLOW_LIST_COLUMNS}, not {cells}"
                )
            table_started = True
            continue
        if set("".join(cells)) <= set("-: "):
            continue
        if len(cells) != len(ALLOW_LIST_COLUMNS) or not all(cells):
            raise AllowListError(f"line {number}: {len(ALLOW_LIST_COLUMNS)} non-empty cells expected: {line}")
        rows.append(Allowance(*cells))
    if not table_started:
        raise AllowListError(f"no table after {heading!r}")
    return rows


@dataclass
class AllowList:
    entries: list[Allowance]
    used: dict[Allowance, int] = field(default_factory=dict)
    """How many differences each entry allowed so far."""

    def apply(self, peer: str, differences: Iterable[Difference]) -> list[Difference]:
        """The differences no entry allows; counts what each entry allowed."""
        remaining = []
        for difference in differences:
            entry = next((e for e in self.entries if e.allows(peer, difference)), None)
            if entry is None:
                remaining.append(difference)
            else:
                self.used[entry] = self.used.get(entry, 0) + 1
        return remaining

    def report(self) -> list[str]:
        """One line per entry: how many differences it allowed, and why they are allowed."""
        width = max((len(str(n)) for n in self.used.values()), default=1)
        return [f"{self.used.get(entry, 0):>{width}}  {entry}" for entry in self.entries]


# --- normalising -------------------------------------------------------------------------------------------


def replace_strings(value: Json, replacements: Sequence[tuple[str, str]]) -> Json:
    """``value`` with every occurrence of each ``old`` in its strings (map keys too) made ``new``."""
    if isinstance(value, str):
        for old, new in replacements:
            if old:
                value = value.replace(old, new)
        return value
    if isinstance(value, dict):
        return {replace_strings(k, replacements): replace_strings(v, replacements) for k, v in value.items()}
    if isinstance(value, list):
        return [replace_strings(item, replacements) for item in value]
    return value


def object_name(obj: Mapping[str, Json]) -> str:
    """``Kind name``; a generated name as its prefix and ``*`` (``Pod pi-launcher-*``)."""
    metadata = obj.get("metadata") or {}
    name = str(metadata.get("name", ""))
    generated = metadata.get("generateName")
    if generated and name.startswith(generated):
        name = f"{generated}*"
    return f"{obj.get('kind')} {name}"


def generated_names(objects: Iterable[Mapping[str, Json]]) -> list[tuple[str, str]]:
    """``(name, prefix*)`` for every object whose name was generated, to replace wherever it appears."""
    pairs = []
    for obj in objects:
        metadata = obj.get("metadata") or {}
        name, prefix = metadata.get("name"), metadata.get("generateName")
        if prefix and isinstance(name, str) and name.startswith(prefix) and name != prefix:
            pairs.append((name, f"{prefix}*"))
    return pairs


def _without(mapping: Mapping[str, Json], keys: Iterable[str]) -> dict[str, Json]:
    dropped = set(keys)
    return {k: v for k, v in mapping.items() if k not in dropped}


def child_view(obj: Mapping[str, Json]) -> dict[str, Json]:
    """What an operator decided about one of a job's children: its metadata less the API server's, and its
    spec (data keys, for a Secret); never its status, which the kubelet stand-in and Kubernetes' controllers
    write. A pod's node is the scheduler's choice, a Service's cluster IP the allocator's."""
    kind = obj.get("kind")
    view: dict[str, Json] = {"metadata": _without(obj.get("metadata") or {}, DROPPED_METADATA)}
    for key, value in obj.items():
        if key in ("apiVersion", "kind", "metadata", "status"):
            continue
        view[key] = value
    view["apiVersion"] = obj.get("apiVersion")
    if kind == "Secret":
        # Random key material: which keys there are is what both operators decide.
        view["data"] = sorted((obj.get("data") or {}).keys())
    if kind == "ConfigMap" and str(view["metadata"].get("name", "")).endswith(RUNTIME_SNAPSHOT_SUFFIX):
        view["data"] = runtime_snapshot_view(obj.get("data") or {})
    spec = view.get("spec")
    if kind == "Pod" and isinstance(spec, dict):
        view["spec"] = _without(spec, ("nodeName",))
    if kind == "Service" and isinstance(spec, dict) and spec.get("clusterIP") != "None":
        view["spec"] = _without(spec, ("clusterIP", "clusterIPs"))
    return view


RUNTIME_SNAPSHOT_SUFFIX = "-runtime-snapshot"
"""A TrainJob's runtime snapshot ConfigMap (Kubeflow Trainer v2.3's KEP-2599): the runtime as it was stored,
as YAML under ``runtime``."""


GO_ZERO_STRUCTS = frozenset({"metadata", "resources", "status"})
"""Fields Go writes as ``{}`` when their struct is zero (no ``omitempty`` on a struct value): a template's
``metadata``, a container's ``resources``, a claim template's ``status``. Read back, ``{}`` there is the same
as the field left out, which is how a runtime stored by the API server has them."""
QUANTITY_MAPS = frozenset({"requests", "limits", "overhead"})
"""Maps of quantities: Go writes each as a string (``"2"``), YAML as stored may hold a number (``2``)."""


def runtime_snapshot_view(data: Mapping[str, Json]) -> dict[str, Json]:
    """A runtime snapshot's data with its YAML read: the runtime compared field by field as either operator
    reads it back, less what the API server set on it (its uid, resourceVersion, managedFields... differ on
    every install). Trainer writes it from its Go types, kubetrain as the API server stored the runtime: a
    zero struct's ``{}`` and a quantity written as a number or a string read back the same, and so does the
    text's layout, so none of them is compared."""
    import yaml

    view: dict[str, Json] = dict(data)
    text = data.get("runtime")
    if isinstance(text, str):
        try:
            runtime = yaml.safe_load(text)
        except yaml.YAMLError:
            return view  # compared as the text it is
        if isinstance(runtime, dict):
            runtime = {**runtime, "metadata": _without(runtime.get("metadata") or {}, DROPPED_METADATA)}
        view["runtime"] = _as_read_back(runtime)
    return view


def _as_read_back(value: Json, key: str = "") -> Json:
    if isinstance(value, dict):
        if key in QUANTITY_MAPS:
            return {
                k: str(v) if isinstance(v, int) and not isinstance(v, bool) else v for k, v in value.items()
            }
        return {k: _as_read_back(v, k) for k, v in value.items() if not (k in GO_ZERO_STRUCTS and v == {})}
    if isinstance(value, list):
        return [_as_read_back(item) for item in value]
    return value


def _time(value: Json) -> Json:
    return SET if value else ABSENT


def status_view(status: Mapping[str, Json]) -> dict[str, Json]:
    """A job's status: each condition (by type) less its times, their order (the last is the job's state),
    the replica statuses as they are, and which times are set."""
    conditions = status.get("conditions") or []
    view: dict[str, Json] = {
        "conditions": {
            c.get("type"): _without(c, ("type", "lastUpdateTime", "lastTransitionTime")) for c in conditions
        },
        "conditionOrder": [c.get("type") for c in conditions],
    }
    for key, value in status.items():
        if key == "conditions":
            continue
        view[key] = _time(value) if key.endswith("Time") else value
    return {k: v for k, v in view.items() if v is not ABSENT}


def job_view(job: Mapping[str, Json]) -> dict[str, Json]:
    """A training job as stored: what the operator may have written to it, its status above all."""
    view = child_view({k: v for k, v in job.items() if k != "status"})
    view["status"] = status_view(job.get("status") or {})
    return view


def event_count(event: Mapping[str, Json]) -> int:
    """How many times an Event says it happened: its ``count`` (core/v1's recorder), else its series' count
    (events.k8s.io/v1's recorder keeps repeats there), else once."""
    series = event.get("series") or {}
    return int(event.get("count") or series.get("count") or 1)


def event_source(event: Mapping[str, Json]) -> Json:
    """Who recorded an Event: core/v1's ``source.component``, or events.k8s.io/v1's reporting controller
    (read through core/v1 as ``reportingComponent``), which names the same thing."""
    return (event.get("source") or {}).get("component") or event.get("reportingComponent") or None


def event_objects(events: Iterable[Mapping[str, Json]]) -> dict[str, Json]:
    """Events as compared: one entry per (object, reason, message), its type, count and source; repeats in
    several Event objects (past the recorder's folding window) add up. An Event recorded through
    events.k8s.io/v1 is read as core/v1 serves it, so both APIs' events compare alike."""
    folded: dict[str, dict[str, Json]] = {}
    for event in events:
        involved = event.get("involvedObject") or {}
        about = f"{involved.get('kind')}/{involved.get('name')}"
        key = f"Event {about} {event.get('reason')}: {event.get('message')}"
        entry = folded.setdefault(
            key,
            {"type": event.get("type"), "count": 0, "source": event_source(event)},
        )
        entry["count"] += event_count(event)
    return dict(folded)


@dataclass(frozen=True)
class Snapshot:
    """What one operator made of a case: every object by ``object_name`` (children, the job, its events)."""

    objects: dict[str, Json]

    @classmethod
    def of(
        cls,
        job: Mapping[str, Json] | None,
        children: Sequence[Mapping[str, Json]],
        events: Sequence[Mapping[str, Json]],
        replacements: Sequence[tuple[str, str]],
    ) -> Snapshot:
        """``replacements`` (the namespace's name, uids) are made the same on both sides first; so are the
        generated names of ``children``."""
        every = [*(c for c in children), *([job] if job else [])]
        replace = [*generated_names(every), *replacements]
        objects: dict[str, Json] = {}
        for child in children:
            objects[object_name(child)] = replace_strings(child_view(child), replace)
        if job is not None:
            objects[object_name(job)] = replace_strings(job_view(job), replace)
        for name, entry in event_objects(events).items():
            objects[replace_strings(name, replace)] = entry
        return cls(objects)
