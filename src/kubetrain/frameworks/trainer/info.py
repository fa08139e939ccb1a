"""What a TrainJob's runtime becomes while its objects are planned: Trainer v2's ``runtime.Info``.

The planned JobSet spec is built in place: a ``PodSet`` holds the pod spec of its replicated job inside
``RuntimeInfo.jobset_spec``, and each policy (torch, MPI, gang scheduling, ...) edits it there with the same
upserts Trainer uses (``pkg/apply``), so env, ports, volumes and mounts end in Trainer's order.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kubetrain.api.quantity import add_resources, canonical_quantity, parse_quantity, quantity_format
from kubetrain.api.trainer import MLPolicy, PodGroupPolicy, TrainJob
from kubetrain.frameworks.trainer.constants import ANCESTOR_LABEL, ANCESTOR_TRAINER, NODE

Obj = dict[str, Any]


@dataclass
class PodSet:
    """One replicated job of the planned JobSet, as its pods will be."""

    name: str
    ancestor: str | None
    count: int
    """Pods of one of its Jobs (``parallelism`` and ``completions``): the trainer's is ``numNodes``."""
    replicas: int
    """How many Jobs of it the JobSet makes (``replicas``)."""
    pod_spec: Obj
    """Its pod spec, inside ``RuntimeInfo.jobset_spec``: edits here are the plan's."""
    single_pod_requests: dict[str, Fraction] = field(default_factory=dict)
    """What one of its pods requests, as ``PodRequests`` counts it (a gang sums count times this)."""
    request_formats: dict[str, str] = field(default_factory=dict)
    """Each requested resource's quantity format as first written (``BinarySI`` for ``Gi``...)."""
    endpoints: tuple[str, ...] = ()
    """Every pod's address (``<job>-<rjob>-<jobIndex>-<podIndex>.<subdomain>``), set by the network."""

    @property
    def containers(self) -> list[Obj]:
        containers: list[Obj] = self.pod_spec.setdefault("containers", [])
        return containers

    @property
    def init_containers(self) -> list[Obj]:
        containers: list[Obj] = self.pod_spec.get("initContainers") or []
        return containers

    def container(self, name: str) -> Obj | None:
        return next((c for c in self.containers if c.get("name") == name), None)

    def any_container(self, name: str) -> Obj | None:
        """A container or init container of that name."""
        return self.container(name) or next((c for c in self.init_containers if c.get("name") == name), None)

    def upsert_volumes(self, *volumes: Obj) -> None:
        upsert(self.pod_spec.setdefault("volumes", []), volumes, by_name)


@dataclass
class RuntimeInfo:
    """The runtime, with the TrainJob's patches and resources merged, while the policies shape it."""

    trainjob: TrainJob
    labels: dict[str, str]
    """The JobSet's labels (the runtime template's, then the patches')."""
    annotations: dict[str, str]
    ml_policy: MLPolicy | None
    pod_group_policy: PodGroupPolicy | None
    jobset_spec: Obj
    pod_sets: list[PodSet]
    pod_labels: dict[str, str] = field(default_factory=dict)
    """Labels every pod gets for its gang scheduler (coscheduling's pod-group label)."""
    pod_annotations: dict[str, str] = field(default_factory=dict)
    """Annotations every pod gets for its gang scheduler (Volcano's group name)."""
    trainer_command: list[str] | None = None
    """The ``node`` container's command from the TrainJob, as the policies extend it (torchtune's recipe)."""

    def pod_set(self, name: str) -> PodSet | None:
        return next((p for p in self.pod_sets if p.name == name), None)

    def pod_set_by_ancestor(self, ancestor: str) -> PodSet | None:
        return next((p for p in self.pod_sets if p.ancestor == ancestor), None)

    def container_by_ancestor(self, ancestor: str, container: str) -> Obj | None:
        pod_set = self.pod_set_by_ancestor(ancestor)
        return pod_set.container(container) if pod_set is not None else None

    def replicated_jobs(self) -> Iterator[Obj]:
        yield from self.jobset_spec.get("replicatedJobs") or []


def upsert(items: list[Obj], new: Any, same: Any) -> None:
    """Trainer's ``apply.upsert``: each new item replaces the first existing one ``same`` matches, else it
    is appended."""
    for item in new:
        for index, existing in enumerate(items):
            if same(existing, item):
                items[index] = item
                break
        else:
            items.append(item)


def by_name(a: Obj, b: Obj) -> bool:
    return a.get("name") == b.get("name")


def by_mount_path(a: Obj, b: Obj) -> bool:
    return a.get("mountPath") == b.get("mountPath")


def by_port_or_name(a: Obj, b: Obj) -> bool:
    # Go's ptr.Equal: two unnamed ports are "equal by name": an unnamed port replaces the first unnamed one.
    return a.get("containerPort") == b.get("containerPort") or a.get("name") == b.get("name")


def upsert_env(container: Obj, *env: Obj) -> None:
    if env:
        upsert(container.setdefault("env", []), env, by_name)


def upsert_mounts(container: Obj, *mounts: Obj) -> None:
    if mounts:
        upsert(container.setdefault("volumeMounts", []), mounts, by_mount_path)


def upsert_ports(container: Obj, *ports: Obj) -> None:
    if ports:
        upsert(container.setdefault("ports", []), ports, by_port_or_name)


def env_value(name: str, value: str) -> Obj:
    return {"name": name, "value": value}


def env_field(name: str, field_path: str) -> Obj:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}


def pod_requests(pod_spec: Mapping[str, Any]) -> tuple[dict[str, Fraction], dict[str, str]]:
    """Kubernetes' ``PodRequests``: the containers' requests summed, each at least any one init container's,
    plus the pod's overhead; with each resource's format as first written."""
    total: dict[str, Fraction] = {}
    formats: dict[str, str] = {}
    for container in pod_spec.get("containers") or []:
        requests = _requests(container)
        add_resources(total, requests)
        _remember_formats(formats, requests)
    for container in pod_spec.get("initContainers") or []:
        requests = _requests(container)
        _remember_formats(formats, requests)
        for name, quantity in requests.items():
            total[name] = max(total.get(name, Fraction(0)), parse_quantity(quantity))
    overhead = pod_spec.get("overhead") or {}
    add_resources(total, overhead)
    _remember_formats(formats, overhead)
    return total, formats


def _requests(container: Mapping[str, Any]) -> dict[str, str | int]:
    requests: dict[str, str | int] = dict((container.get("resources") or {}).get("requests") or {})
    return requests


def _remember_formats(formats: dict[str, str], resources: Mapping[str, Any]) -> None:
    for name, quantity in resources.items():
        formats.setdefault(name, quantity_format(quantity))


def with_go_quantities(pod_spec: Obj) -> None:
    """Every container's requests and limits, and the pod's overhead, written as Go's ``resource.Quantity``
    marshals them (``2`` as ``"2"``, ``0.5`` as ``"500m"``), as Trainer's applied objects carry them: a JobSet
    applied again then changes nothing the API server stored. A quantity that does not parse is left as it is
    (the API server says what is wrong with it)."""
    for container in [*(pod_spec.get("containers") or []), *(pod_spec.get("initContainers") or [])]:
        resources = container.get("resources")
        for kind in ("requests", "limits"):
            if isinstance(resources, dict) and isinstance(resources.get(kind), dict):
                resources[kind] = {name: _go_quantity(value) for name, value in resources[kind].items()}
    if isinstance(pod_spec.get("overhead"), dict):
        pod_spec["overhead"] = {name: _go_quantity(value) for name, value in pod_spec["overhead"].items()}


def _go_quantity(value: Any) -> Any:
    try:
        return canonical_quantity(parse_quantity(value), quantity_format(value))
    except (ValueError, TypeError):
        return value


def gpus_per_node(resources: Mapping[str, Any] | None) -> int:
    """Trainer's ``GetNumGPUPerNode``: the first resource named ``*gpu*`` in requests, else in limits."""
    resources = resources or {}
    count = _gpus(resources.get("requests") or {})
    return count or _gpus(resources.get("limits") or {})


def _gpus(resources: Mapping[str, Any]) -> int:
    for name, quantity in resources.items():
        if "gpu" in name.lower():
            return _ceil(parse_quantity(quantity))
    return 0


def cpus_per_node(resources: Mapping[str, Any] | None) -> int:
    """Trainer's ``getNumCPUPerNode``: the CPU request rounded up, else the limit, else 0."""
    resources = resources or {}
    request = (resources.get("requests") or {}).get("cpu")
    if request is not None and parse_quantity(request) != 0:
        return _ceil(parse_quantity(request))
    limit = (resources.get("limits") or {}).get("cpu")
    return _ceil(parse_quantity(limit)) if limit is not None else 0


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def runtime_resources_per_node(info: RuntimeInfo) -> Obj | None:
    """Trainer's ``ExtractResourcePerNodeFromRuntime``: the ``node`` container's resources in the job named
    ``node`` or the trainer job."""
    for job in info.replicated_jobs():
        labels = ((job.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if job.get("name") == NODE or labels.get(ANCESTOR_LABEL) == ANCESTOR_TRAINER:
            spec = (((job.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
            for container in spec.get("containers") or []:
                if container.get("name") == NODE and container.get("resources") is not None:
                    resources: Obj = container["resources"]
                    return resources
    return None


def node_resources(info: RuntimeInfo) -> Obj:
    """Resources of one training node: the TrainJob's ``resourcesPerNode`` if set, else the runtime's."""
    trainer = info.trainjob.spec.trainer
    if trainer is not None and trainer.resources_per_node is not None:
        return trainer.resources_per_node
    return runtime_resources_per_node(info) or {}
