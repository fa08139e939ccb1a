"""From a replica's plan (its injected pod template) to the ``podman run`` / ``docker run`` that runs it.

This is the container twin of ``launch.py`` and, like the kubelet, it changes nothing about the
container: the pod template's image, ``command`` (the entrypoint), ``args``, ``env`` (injected env
included, ``$(VAR)`` expanded as Kubernetes does) and ``workingDir`` go to the engine as written.
What the cluster would give the pod around it is rebuilt from the engine's own parts:

- the pod's network identity: one network per job, the container named after the pod and reachable
  by every DNS name the cluster would give it (``<pod>``, ``<pod>.<job>`` for the job's subdomain,
  ``<pod>.<namespace>.svc`` for its headless service), so MASTER_ADDR, TF_CONFIG and PET_* carry
  the cluster's values;
- the framework's pod decoration, as the operator adds it (MPI v2beta1: the SSH key Secret volume, the
  hostfile ConfigMap, the workers' ``sshd`` command);
- volumes: ``emptyDir`` a directory per replica, ``hostPath`` a bind mount, the framework's generated
  ConfigMap (the MPI hostfile) the run's copy of it, the job's generated Secret (the MPI SSH keys) its
  keys written as files with the volume's modes, mounted read-only as the kubelet mounts a Secret;
- ``resources.limits`` cpu and memory as ``--cpus``/``--memory``, ``nvidia.com/gpu`` as the devices the
  runner assigned (CDI names for podman, ``--gpus`` for docker);
- ``imagePullPolicy`` as ``--pull``, with Kubernetes' default (``Always`` for ``:latest`` or no tag);
- the run's status endpoint: the reporting variables, the replica's CA and token mounted read-only where
  Kubeflow Trainer v2 mounts them, and the engine's name for the host (``host.containers.internal``,
  ``host.docker.internal``) pointed at the job network's gateway, where the endpoint listens.

Everything here is pure, so the exact argv for a job is a unit test.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from pathlib import Path
from typing import Any

from kubetrain.api.errors import FieldError, InvalidJobError
from kubetrain.api.jobs import TrainingJob
from kubetrain.engine.types import ReplicaPlan
from kubetrain.frameworks.addressing import replica_name
from kubetrain.local.expansion import expand_all
from kubetrain.local.launch import container_env, main_container, short_name
from kubetrain.local.status_access import CREDENTIALS_MOUNT, ReporterAccess

LABEL_PREFIX = "kubetrain.io/"
RUN_ID_LABEL = f"{LABEL_PREFIX}run-id"
"""Every container and the network of one ``kubetrain run`` carry it: what the reaper removes."""
JOB_LABEL = f"{LABEL_PREFIX}local-job"
"""The job name: leftovers of an earlier run of the same job are found by it."""
RUNNER_PID_LABEL = f"{LABEL_PREFIX}runner-pid"
REPLICA_LABEL = f"{LABEL_PREFIX}replica"


class Engine(StrEnum):
    PODMAN = "podman"
    DOCKER = "docker"


class PullPolicy(StrEnum):
    """``imagePullPolicy`` as the engines' ``--pull`` values."""

    ALWAYS = "always"
    MISSING = "missing"
    NEVER = "never"


_PULL_POLICIES = {"Always": PullPolicy.ALWAYS, "IfNotPresent": PullPolicy.MISSING, "Never": PullPolicy.NEVER}

HOST_NAMES = {Engine.PODMAN: "host.containers.internal", Engine.DOCKER: "host.docker.internal"}
"""Each engine's name, inside a container, for the host: the name a container reaches the run's status
endpoint by. Podman sets it by itself and docker only when asked; kubetrain passes it to both as
``--add-host``, pointed at the job network's gateway (the host's address on that network)."""


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool = False


@dataclass(frozen=True)
class VolumeFile:
    """A file the run writes before the container starts (a Secret volume's key), with its mode."""

    path: str
    content: bytes = field(repr=False)
    mode: int


@dataclass(frozen=True)
class ContainerRun:
    """One replica's container, everything ``run_argv`` needs."""

    replica: str
    """``<type>-<index>``: the console prefix and log file name."""
    name: str
    """The pod's name, ``<job>-<type>-<index>``: the container's name and hostname."""
    image: str
    image_field: str
    """Where the image is named, for errors (``spec.pytorchReplicaSpecs.Master...containers[0].image``)."""
    pull: PullPolicy
    entrypoint: str | None
    """``command[0]`` when the pod sets a command (it replaces the image's entrypoint and CMD)."""
    args: tuple[str, ...]
    env: dict[str, str]
    working_dir: str | None
    network: str
    aliases: tuple[str, ...]
    labels: dict[str, str]
    mounts: tuple[Mount, ...] = ()
    emptydirs: tuple[str, ...] = ()
    """Host directories the run must create before the container starts (``emptyDir`` sources)."""
    files: tuple[VolumeFile, ...] = ()
    """Files the run must write before the container starts, in directories of their own."""
    cpus: str | None = None
    memory: int | None = None
    gpus: tuple[str, ...] = ()
    restart_policy: str = "Never"
    hostname: str | None = None
    """The pod's name where the container is not named after it (an init container)."""
    init: tuple[ContainerRun, ...] = ()
    """The pod's init containers, run in order to completion before this one, as the kubelet does."""
    hosts: tuple[tuple[str, str], ...] = ()
    """``/etc/hosts`` entries beyond the engine's own: ``(name, address)``."""


def network_name(job_name: str) -> str:
    """One network per job, prefixed so it cannot be mistaken for a user's own network."""
    return f"kubetrain-{job_name}"


def dns_aliases(job: TrainingJob, pod_name: str) -> tuple[str, ...]:
    """Every name the cluster's DNS would give the pod (named as the framework names it: a JobSet's pod by
    its host name, ``<jobset>-<replicated job>-<job index>-<index>``): its service, and its host in the job's
    subdomain."""
    names = [
        pod_name,
        f"{pod_name}.{job.name}",
        f"{pod_name}.{job.namespace}.svc",
        f"{pod_name}.{job.name}.{job.namespace}.svc",
    ]
    return tuple(dict.fromkeys(names))


def pull_policy(container: Mapping[str, Any]) -> PullPolicy:
    """The container's ``imagePullPolicy``, defaulted as the API server does when absent."""
    written = container.get("imagePullPolicy")
    if written in _PULL_POLICIES:
        return _PULL_POLICIES[str(written)]
    image = str(container.get("image") or "")
    last = image.rsplit("/", 1)[-1]
    if "@" in last:
        return PullPolicy.MISSING
    tag = last.split(":", 1)[1] if ":" in last else "latest"
    return PullPolicy.ALWAYS if tag == "latest" else PullPolicy.MISSING


_BINARY_SUFFIXES: dict[str, Decimal] = {
    suffix: Decimal(2) ** (10 * power) for power, suffix in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), 1)
}
_DECIMAL_SUFFIXES: dict[str, Decimal] = {
    "m": Decimal("0.001"),
    **{suffix: Decimal(10) ** (3 * power) for power, suffix in enumerate(("k", "M", "G", "T", "P", "E"), 1)},
}


def quantity(value: object) -> Decimal:
    """A Kubernetes resource quantity (``500m``, ``1.5``, ``2Gi``, ``1e3``) as a number."""
    text = str(value).strip()
    for suffixes in (_BINARY_SUFFIXES, _DECIMAL_SUFFIXES):
        for suffix, factor in suffixes.items():
            if text.endswith(suffix) and len(text) > len(suffix):
                return _number(text[: -len(suffix)], value) * factor
    return _number(text, value)


def _number(text: str, original: object) -> Decimal:
    try:
        number = Decimal(text)
    except InvalidOperation:
        raise ValueError(f"{original!r} is not a resource quantity") from None
    if not number.is_finite() or number < 0:
        raise ValueError(f"{original!r} is not a resource quantity")
    return number


def cpus_flag(value: object) -> str:
    """``--cpus`` takes decimal cores: ``500m`` → ``0.5``."""
    return format(quantity(value).normalize(), "f")


def memory_flag(value: object) -> int:
    """``--memory`` in bytes, rounded up as the kubelet rounds a limit up to whole bytes."""
    return int(quantity(value).to_integral_value(rounding="ROUND_CEILING"))


def container_run(
    plan: ReplicaPlan,
    job: TrainingJob,
    *,
    labels: Mapping[str, str],
    volumes_dir: Path,
    config_mount: tuple[str, Path] | None = None,
    secrets: Mapping[str, Mapping[str, bytes]] | None = None,
    gpus: Sequence[str] = (),
) -> ContainerRun:
    """The container for ``plan``; raises ``InvalidJobError`` for what has no local equivalent.

    ``volumes_dir`` is the run's directory for per-replica ``emptyDir`` volumes; ``config_mount`` is
    the framework's generated ConfigMap (mount path, the run's directory holding its files);
    ``secrets`` the job's generated Secrets' data by name (the MPI SSH keys).
    """
    position, container = main_container(plan)
    pod_path = f"{job.replica_specs_path}.{plan.replica_type}.template.spec"
    pod_name = replica_name(job.name, plan.replica_type, plan.index)
    volumes = (volumes_dir, config_mount, secrets or {})
    errors: list[FieldError] = []
    init = []
    for index, init_container in enumerate((plan.template.get("spec") or {}).get("initContainers") or []):
        # An init container shares the pod's volumes, not its DNS names: the pod is not up yet.
        name = f"{pod_name}-init-{init_container.get('name') or index}"
        init.append(
            _container_run(
                plan,
                job,
                init_container,
                f"{pod_path}.initContainers[{index}]",
                name,
                (),
                (),
                labels,
                volumes,
                errors,
            )
        )
    main = _container_run(
        plan,
        job,
        container,
        f"{pod_path}.containers[{position}]",
        pod_name,
        dns_aliases(job, plan.name),
        tuple(gpus),
        labels,
        volumes,
        errors,
    )
    if errors:
        raise InvalidJobError(errors)
    return replace(main, init=tuple(replace(i, hostname=pod_name) for i in init))


def _container_run(
    plan: ReplicaPlan,
    job: TrainingJob,
    container: Mapping[str, Any],
    path: str,
    name: str,
    aliases: tuple[str, ...],
    gpus: tuple[str, ...],
    labels: Mapping[str, str],
    volumes: tuple[Path, tuple[str, Path] | None, Mapping[str, Mapping[str, bytes]]],
    errors: list[FieldError],
) -> ContainerRun:
    """One container of the pod (the main one or an init container); problems go to ``errors``."""
    variables = {}
    try:
        variables = container_env(plan, job, container, path)
    except InvalidJobError as error:
        errors.extend(error.errors)
    command = expand_all([str(c) for c in container.get("command") or []], variables)
    args = expand_all([str(a) for a in container.get("args") or []], variables)
    image = str(container.get("image") or "")
    if not image:
        errors.append(FieldError(f"{path}.image", "required to run in a container"))
    replica = short_name(plan.replica_type, plan.index)
    volumes_dir, config_mount, secrets = volumes
    mounts, emptydirs, files = _mounts(
        plan, container, path, volumes_dir / replica, config_mount, secrets, errors
    )
    limits = (container.get("resources") or {}).get("limits") or {}
    cpus = memory = None
    try:
        cpus = cpus_flag(limits["cpu"]) if "cpu" in limits else None
        memory = memory_flag(limits["memory"]) if "memory" in limits else None
    except ValueError as error:
        errors.append(FieldError(f"{path}.resources.limits", str(error)))
    return ContainerRun(
        replica=replica,
        name=name,
        image=image,
        image_field=f"{path}.image",
        pull=pull_policy(container),
        entrypoint=command[0] if command else None,
        args=tuple(command[1:] + args),
        env=variables,
        working_dir=str(container["workingDir"]) if container.get("workingDir") else None,
        network=network_name(job.name),
        aliases=aliases,
        labels={**plan.labels, **labels, REPLICA_LABEL: replica},
        mounts=mounts,
        emptydirs=emptydirs,
        files=files,
        cpus=cpus,
        memory=memory,
        gpus=gpus,
        restart_policy=str((plan.template.get("spec") or {}).get("restartPolicy") or "Never"),
    )


def _mounts(
    plan: ReplicaPlan,
    container: Mapping[str, Any],
    path: str,
    replica_volumes: Path,
    config_mount: tuple[str, Path] | None,
    secrets: Mapping[str, Mapping[str, bytes]],
    errors: list[FieldError],
) -> tuple[tuple[Mount, ...], tuple[str, ...], tuple[VolumeFile, ...]]:
    volumes_path = f"{path.rsplit('.containers[', 1)[0]}.volumes"
    volumes = {
        str(v.get("name")): (i, v)
        for i, v in enumerate((plan.template.get("spec") or {}).get("volumes") or [])
    }
    mounts: list[Mount] = []
    emptydirs: list[str] = []
    files: list[VolumeFile] = []
    for position, mount in enumerate(container.get("volumeMounts") or []):
        name = str(mount.get("name", ""))
        target = str(mount.get("mountPath", ""))
        read_only = bool(mount.get("readOnly", False))
        sub_path = str(mount.get("subPath") or "")
        if name not in volumes:
            errors.append(FieldError(f"{path}.volumeMounts[{position}].name", f"no volume named {name!r}"))
            continue
        index, volume = volumes[name]
        where = f"{volumes_path}[{index}]"
        if "emptyDir" in volume:
            source = str(replica_volumes / name)
            emptydirs.append(source)
        elif "hostPath" in volume:
            source = str((volume.get("hostPath") or {}).get("path", ""))
        elif config_mount is not None and target.rstrip("/") == config_mount[0].rstrip("/"):
            # The framework's own ConfigMap (MPI hostfile): the run writes the same files.
            source, read_only = str(config_mount[1]), True
        elif str((volume.get("secret") or {}).get("secretName")) in secrets:
            source, read_only = str(replica_volumes / name), True
            secret = volume["secret"]
            files += _secret_files(secret, secrets[str(secret["secretName"])], Path(source))
        else:
            kinds = ", ".join(sorted(k for k in volume if k != "name")) or "this volume"
            errors.append(
                FieldError(
                    where,
                    f"{kinds} has no local equivalent (no cluster here); use a hostPath or emptyDir volume",
                )
            )
            continue
        if sub_path:
            source = f"{source.rstrip('/')}/{sub_path}"
        mounts.append(Mount(source, target, read_only))
    return tuple(mounts), tuple(emptydirs), tuple(files)


DEFAULT_SECRET_MODE = 0o644
"""A Secret volume's files without ``defaultMode`` or an item ``mode``, as the API server defaults them."""


def _secret_files(secret: Mapping[str, Any], data: Mapping[str, bytes], directory: Path) -> list[VolumeFile]:
    """The files a Secret volume holds: its ``items`` (or every key), each with its mode."""
    default_mode = int(secret.get("defaultMode", DEFAULT_SECRET_MODE))
    items = secret.get("items") or [{"key": key, "path": key} for key in sorted(data)]
    return [
        VolumeFile(
            str(directory / str(item["path"])),
            data[str(item["key"])],
            int(item.get("mode", default_mode)),
        )
        for item in items
        if str(item.get("key")) in data
    ]


def with_reporting(run: ContainerRun, access: ReporterAccess, host: tuple[str, str]) -> ContainerRun:
    """``run`` reporting to the run's status endpoint, its init containers too (Trainer v2 injects into every
    container of a pod): the variables after each container's own env, the replica's credentials directory
    mounted read-only at ``CREDENTIALS_MOUNT``, and ``host`` (the name in the URL, the address the endpoint
    listens on) in its ``/etc/hosts``."""
    return replace(
        run,
        env={**run.env, **access.container_env()},
        mounts=(*run.mounts, Mount(str(access.directory), CREDENTIALS_MOUNT, read_only=True)),
        hosts=(*run.hosts, host),
        init=tuple(with_reporting(init, access, host) for init in run.init),
    )


def replica_argv(engine: Engine, binary: str, run: ContainerRun) -> list[str]:
    """What starts the replica: its ``run``, or, with init containers, a shell that runs each of them to
    completion in order (a failing one ends it with that exit code, as a pod's init failure) and then
    becomes the main container's ``run``."""
    if not run.init:
        return run_argv(engine, binary, run)
    steps = [f"{shlex.join(run_argv(engine, binary, init, remove=True))} || exit $?" for init in run.init]
    return ["/bin/sh", "-c", "; ".join([*steps, f"exec {shlex.join(run_argv(engine, binary, run))}"])]


def run_argv(engine: Engine, binary: str, run: ContainerRun, *, remove: bool = False) -> list[str]:
    """``podman run`` / ``docker run`` for one replica: the same flags for both engines but GPUs.

    The container runs attached (its output is the replica's log) and is not ``--rm``: a finished
    container stays until the engine deletes its pod or the next run of the job, as pods do.
    """
    argv = [
        binary,
        "run",
        *(["--rm"] if remove else []),
        "--name",
        run.name,
        "--hostname",
        run.hostname or run.name,
    ]
    argv += ["--network", run.network]
    for alias in run.aliases:
        argv += ["--network-alias", alias]
    for name, address in run.hosts:
        argv += ["--add-host", f"{name}:{address}"]
    for key, value in sorted(run.labels.items()):
        argv += ["--label", f"{key}={value}"]
    argv += ["--pull", str(run.pull)]
    if run.cpus is not None:
        argv += ["--cpus", run.cpus]
    if run.memory is not None:
        argv += ["--memory", str(run.memory)]
    if run.gpus:
        if engine is Engine.PODMAN:
            for device in run.gpus:
                argv += ["--device", f"nvidia.com/gpu={device}"]
        else:
            # docker's --gpus value is CSV: a list of devices must be quoted inside the value.
            argv += ["--gpus", f'"device={",".join(run.gpus)}"']
    for mount in run.mounts:
        argv += ["--volume", f"{mount.source}:{mount.target}" + (":ro" if mount.read_only else "")]
    if run.working_dir is not None:
        argv += ["--workdir", run.working_dir]
    for name, value in run.env.items():
        argv += ["--env", f"{name}={value}"]
    if run.entrypoint is not None:
        argv += ["--entrypoint", run.entrypoint]
    return [*argv, run.image, *run.args]


@dataclass(frozen=True)
class ContainerPlan:
    """What ``kubetrain plan -t local --runtime ENGINE`` shows for one replica."""

    run: ContainerRun
    argv: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        command = [self.run.entrypoint, *self.run.args] if self.run.entrypoint else list(self.run.args)
        return {
            "replica": self.run.replica,
            "container": self.run.name,
            "image": self.run.image,
            "network": self.run.network,
            "aliases": list(self.run.aliases),
            "command": command,
            "workingDir": self.run.working_dir,
            "env": self.run.env,
            "restartPolicy": self.run.restart_policy,
            "run": shlex.join(self.argv),
        }
