"""Building a PyTorchJob or TFJob from a Python function, as upstream's ``TrainingClient.create_job`` does.

The function's source is dedented, a call with ``parameters`` appended, and the whole written by a
``bash -c`` script to a temporary file that ``torchrun`` (PyTorch with several workers or
``num_procs_per_worker``) or ``python -u`` runs. One deliberate difference: the here-document's delimiter
is quoted, so ``$`` and backticks in the function's source reach Python unchanged (upstream lets bash
expand them).
"""

from __future__ import annotations

import inspect
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubetrain.api.common import ObjectMeta, ReplicaSpec
from kubetrain.api.jobs import PyTorchJob, PyTorchJobSpec, TFJob, TFJobSpec, TrainingJob
from kubetrain.sdk.kinds import JobKind

DEFAULT_PIP_INDEX_URL = "https://pypi.org/simple"
ISTIO_SIDECAR_ANNOTATION = "sidecar.istio.io/inject"
GPU_RESOURCE = "nvidia.com/gpu"
SCRIPT_DELIMITER = "KUBETRAIN_EOF"

BASE_IMAGES: dict[type[TrainingJob], str] = {
    PyTorchJob: "docker.io/pytorch/pytorch:2.1.2-cuda11.8-cudnn8-runtime",
    TFJob: "docker.io/tensorflow/tensorflow:2.9.1",
}
"""Upstream's base images (``JOB_PARAMETERS``); only these two kinds can be built from a function."""

EnvVars = Mapping[str, str] | Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class FunctionJobRequest:
    """What ``create_job`` was given besides a full job object."""

    name: str
    namespace: str
    kind: JobKind
    base_image: str | None = None
    train_func: Callable[..., Any] | None = None
    parameters: Mapping[str, Any] | None = None
    num_workers: int | None = 1
    num_procs_per_worker: int | str | None = None
    resources_per_worker: Mapping[str, Any] | None = None
    num_chief_replicas: int | None = None
    num_ps_replicas: int | None = None
    packages_to_install: Sequence[str] | None = None
    pip_index_url: str = DEFAULT_PIP_INDEX_URL
    env_vars: EnvVars | None = None


def uses_torchrun(kind: JobKind, num_workers: int | None, num_procs_per_worker: int | str | None) -> bool:
    return kind.model is PyTorchJob and ((num_workers or 0) > 1 or num_procs_per_worker is not None)


def pip_install_script(packages: Sequence[str], index_url: str) -> str:
    """Upstream's package installation prelude."""
    packages_text = " ".join(str(p) for p in packages)
    return textwrap.dedent(
        f"""
        if ! [ -x "$(command -v pip)" ]; then
            python -m ensurepip || python -m ensurepip --user || apt-get install python-pip
        fi

        PIP_DISABLE_PIP_VERSION_CHECK=1 python -m pip install --quiet \\
        --no-warn-script-location --index-url {index_url} {packages_text}
        """
    )


def function_source(train_func: Callable[..., Any], parameters: Mapping[str, Any] | None) -> str:
    """The function's dedented source followed by the call that runs it."""
    if not callable(train_func):
        raise ValueError(f"Training function must be callable, got function type: {type(train_func)}")
    try:
        source = textwrap.dedent(inspect.getsource(train_func))
    except (OSError, TypeError) as error:
        raise ValueError(
            f"cannot read the source of {train_func!r} ({error}): "
            "define train_func in a file or a notebook cell"
        ) from None
    call = (
        f"{train_func.__name__}()" if parameters is None else f"{train_func.__name__}({dict(parameters)!r})"
    )
    return f"{source}\n{call}\n"


def function_command(
    train_func: Callable[..., Any],
    parameters: Mapping[str, Any] | None,
    entrypoint: str,
    packages_to_install: Sequence[str] | None = None,
    pip_index_url: str = DEFAULT_PIP_INDEX_URL,
) -> tuple[list[str], list[str]]:
    """The container's ``command`` and ``args`` that write the function to a file and run it."""
    code = function_source(train_func, parameters)
    script = (
        "\nprogram_path=$(mktemp -d)\n"
        "trap 'rm -rf \"$program_path\"' EXIT\n"
        f"read -r -d '' SCRIPT << '{SCRIPT_DELIMITER}'\n"
        f"{code}"
        f"{SCRIPT_DELIMITER}\n"
        'printf "%s" "$SCRIPT" > "$program_path/ephemeral_script.py"\n'
        f'{entrypoint} "$program_path/ephemeral_script.py"'
    )
    if packages_to_install:
        script = pip_install_script(packages_to_install, pip_index_url) + script
    return ["bash", "-c"], [script]


def resource_requirements(resources: Mapping[str, Any]) -> dict[str, Any]:
    """``{"cpu", "memory", "gpu"}`` as both requests and limits; ``gpu`` means ``nvidia.com/gpu``."""
    if not isinstance(resources, Mapping):
        raise ValueError(
            f"resources_per_worker must be a dict like {{'cpu': 1, 'gpu': 1}}, got {resources!r}"
        )
    if set(resources) <= {"requests", "limits"} and resources:
        return {k: {n: str(v) for n, v in dict(resources[k]).items()} for k in resources}
    quantities = {GPU_RESOURCE if k == "gpu" else k: str(v) for k, v in resources.items()}
    return {"requests": dict(quantities), "limits": dict(quantities)}


def env_list(env_vars: EnvVars) -> list[dict[str, Any]]:
    """A dict of names to values, or a list of ``{"name": ..., "value" | "valueFrom": ...}``."""
    if isinstance(env_vars, Mapping):
        return [{"name": str(k), "value": str(v)} for k, v in env_vars.items()]
    listed = []
    for position, item in enumerate(env_vars):
        if not isinstance(item, Mapping) or "name" not in item:
            raise ValueError(
                f"env_vars[{position}]: each item must be a dict with a 'name' (and 'value' or 'valueFrom'), "
                f"got {item!r}; or pass a dict of names to values"
            )
        listed.append(dict(item))
    return listed


def _container(request: FunctionJobRequest) -> dict[str, Any]:
    image = request.base_image or BASE_IMAGES[request.kind.model]
    container: dict[str, Any] = {"name": request.kind.default_container, "image": image}
    if request.train_func is not None:
        entrypoint = (
            "torchrun"
            if uses_torchrun(request.kind, request.num_workers, request.num_procs_per_worker)
            else "python -u"
        )
        container["command"], container["args"] = function_command(
            request.train_func,
            request.parameters,
            entrypoint,
            request.packages_to_install,
            request.pip_index_url,
        )
    if request.resources_per_worker:
        container["resources"] = resource_requirements(request.resources_per_worker)
    if request.env_vars:
        container["env"] = env_list(request.env_vars)
    return container


def _template(request: FunctionJobRequest) -> dict[str, Any]:
    return {
        "metadata": {"annotations": {ISTIO_SIDECAR_ANNOTATION: "false"}},
        "spec": {"containers": [_container(request)]},
    }


def _pytorch_job(request: FunctionJobRequest, metadata: ObjectMeta) -> PyTorchJob:
    workers = request.num_workers or 1
    specs = {"Master": ReplicaSpec(replicas=1, template=_template(request))}
    if workers > 1:
        specs["Worker"] = ReplicaSpec(replicas=workers - 1, template=_template(request))
    nproc = None if request.num_procs_per_worker is None else str(request.num_procs_per_worker)
    return PyTorchJob(
        metadata=metadata, spec=PyTorchJobSpec(pytorch_replica_specs=specs, nproc_per_node=nproc)
    )


def _tf_job(request: FunctionJobRequest, metadata: ObjectMeta) -> TFJob:
    specs: dict[str, ReplicaSpec] = {}
    if request.num_chief_replicas is not None:
        specs["Chief"] = ReplicaSpec(replicas=request.num_chief_replicas, template=_template(request))
    if request.num_ps_replicas is not None:
        specs["PS"] = ReplicaSpec(replicas=request.num_ps_replicas, template=_template(request))
    if request.num_workers is not None:
        specs["Worker"] = ReplicaSpec(replicas=request.num_workers, template=_template(request))
    return TFJob(metadata=metadata, spec=TFJobSpec(tf_replica_specs=specs))


_BUILDERS: dict[type[TrainingJob], Callable[[FunctionJobRequest, ObjectMeta], TrainingJob]] = {
    PyTorchJob: _pytorch_job,
    TFJob: _tf_job,
}


def build_job(request: FunctionJobRequest) -> TrainingJob:
    """The job upstream would create for ``train_func`` or ``base_image``; ``ValueError`` for bad input."""
    builder = _BUILDERS.get(request.kind.model)
    if builder is None:
        buildable = ", ".join(m.KIND for m in _BUILDERS)
        raise ValueError(
            f"Job kind {request.kind.kind} can't be created using function or image; only {buildable} can: "
            "pass a full job object for other kinds"
        )
    if request.train_func is None and request.base_image is None:
        raise ValueError("One of the following must be set: job, train_func or base_image")
    if request.num_workers is not None and request.num_workers < 1:
        raise ValueError(f"num_workers must be at least 1, got {request.num_workers}")
    if request.kind.model is PyTorchJob and request.num_workers is None:
        raise ValueError("num_workers must be set for a PyTorchJob")
    if not request.name:
        raise ValueError("name is required when the job is built from train_func or base_image")
    return builder(request, ObjectMeta(name=request.name, namespace=request.namespace))
