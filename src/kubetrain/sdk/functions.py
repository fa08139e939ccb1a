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

from kubetrain.api.common import ObjectMeta
from kubetrain.api.jobs import TrainingJob
from kubetrain.frameworks.base import Framework, FunctionShape
from kubetrain.frameworks.registry import FRAMEWORKS, framework_for_kind
from kubetrain.sdk.kinds import JobKind

DEFAULT_PIP_INDEX_URL = "https://pypi.org/simple"
ISTIO_SIDECAR_ANNOTATION = "sidecar.istio.io/inject"
GPU_RESOURCE = "nvidia.com/gpu"
SCRIPT_DELIMITER = "KUBETRAIN_EOF"

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


def _shape(request: FunctionJobRequest) -> FunctionShape:
    return FunctionShape(
        num_workers=request.num_workers,
        num_procs_per_worker=request.num_procs_per_worker,
        num_chief_replicas=request.num_chief_replicas,
        num_ps_replicas=request.num_ps_replicas,
    )


def _template(request: FunctionJobRequest, framework: Framework[Any]) -> dict[str, Any]:
    """Every replica's pod template: the function (or the image's entrypoint) in the kind's container."""
    image = request.base_image or framework.function_base_image
    container: dict[str, Any] = {"name": framework.default_container, "image": image}
    if request.train_func is not None:
        container["command"], container["args"] = function_command(
            request.train_func,
            request.parameters,
            framework.function_entrypoint(_shape(request)),
            request.packages_to_install,
            request.pip_index_url,
        )
    if request.resources_per_worker:
        container["resources"] = resource_requirements(request.resources_per_worker)
    if request.env_vars:
        container["env"] = env_list(request.env_vars)
    return {
        "metadata": {"annotations": {ISTIO_SIDECAR_ANNOTATION: "false"}},
        "spec": {"containers": [container]},
    }


def build_job(request: FunctionJobRequest) -> TrainingJob:
    """The job upstream would create for ``train_func`` or ``base_image``; ``ValueError`` for bad input."""
    framework = framework_for_kind(request.kind.model.API_VERSION, request.kind.model.KIND)
    if framework.function_base_image is None:
        buildable = ", ".join(f.kind for f in FRAMEWORKS if f.function_base_image is not None)
        raise ValueError(
            f"Job kind {request.kind.kind} can't be created using function or image; only {buildable} can: "
            "pass a full job object for other kinds"
        )
    if request.train_func is None and request.base_image is None:
        raise ValueError("One of the following must be set: job, train_func or base_image")
    if request.num_workers is not None and request.num_workers < 1:
        raise ValueError(f"num_workers must be at least 1, got {request.num_workers}")
    if not request.name:
        raise ValueError("name is required when the job is built from train_func or base_image")
    job = framework.function_job(_shape(request), _template(request, framework))
    metadata = ObjectMeta(name=request.name, namespace=request.namespace)
    built: TrainingJob = job.model_copy(update={"metadata": metadata})
    return built
