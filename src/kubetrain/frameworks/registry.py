"""Every framework kubetrain knows, and the look-ups that find the one a job or a name needs."""

from __future__ import annotations

from typing import Any

from kubetrain.api.errors import FieldError, InvalidJobError
from kubetrain.api.jobs import TrainingJob
from kubetrain.frameworks.base import Framework
from kubetrain.frameworks.jax import JAXFramework
from kubetrain.frameworks.jobset_run import JobSetRunFramework
from kubetrain.frameworks.mpi import MPIFramework
from kubetrain.frameworks.mpi_v2 import MPIV2Framework
from kubetrain.frameworks.mxnet import MXNetFramework
from kubetrain.frameworks.paddle import PaddleFramework
from kubetrain.frameworks.pytorch import PyTorchFramework
from kubetrain.frameworks.tensorflow import TensorFlowFramework
from kubetrain.frameworks.xgboost import XGBoostFramework

FRAMEWORKS: tuple[Framework[Any], ...] = (
    PyTorchFramework(),
    TensorFlowFramework(),
    XGBoostFramework(),
    PaddleFramework(),
    JAXFramework(),
    MXNetFramework(),
    MPIFramework(),
    MPIV2Framework(),
)
"""One instance per framework. The kubeflow.org/v1 MPIJob comes before the v2beta1 one, so a bare
``mpijob`` name means the v1 kind, as it does for the training operator's ``--enable-scheme``."""

INTERNAL_FRAMEWORKS: tuple[Framework[Any], ...] = (JobSetRunFramework(),)
"""Kinds kubetrain runs but serves no CRD for: a TrainJob's JobSet run locally."""

_BY_TYPE: dict[tuple[str, str], Framework[Any]] = {
    (f.api_version, f.kind): f for f in (*FRAMEWORKS, *INTERNAL_FRAMEWORKS)
}


def framework_for_kind(api_version: str, kind: str) -> Framework[Any]:
    try:
        return _BY_TYPE[(api_version, kind)]
    except KeyError:
        supported = ", ".join(f"{f.kind} ({f.api_version})" for f in FRAMEWORKS)
        raise InvalidJobError(
            [FieldError("kind", f"unsupported apiVersion/kind {api_version}/{kind}; supported: {supported}")]
        ) from None


def framework_for(job: TrainingJob) -> Framework[Any]:
    return framework_for_kind(job.API_VERSION, job.KIND)


def _names(framework: Framework[Any]) -> set[str]:
    return {
        framework.scheme_name,
        f"{framework.kind}/{framework.api_version.rsplit('/', 1)[-1]}".lower(),
        f"{framework.kind}.{framework.api_version}".lower(),
    }


def framework_by_name(name: str) -> Framework[Any]:
    """A framework by scheme name (``pytorchjob``, ``tfjob``, ``mpijob-v2beta1``) or kind, any case.

    ``MPIJob``/``mpijob`` is the kubeflow.org/v1 MPIJob; the v2beta1 one is ``mpijob-v2beta1``
    (also ``mpijob/v2beta1`` or ``MPIJob.kubeflow.org/v2beta1``).
    """
    wanted = name.strip().lower()
    for framework in FRAMEWORKS:
        if wanted in _names(framework) or wanted == framework.kind.lower():
            return framework
    known = ", ".join(f.scheme_name for f in FRAMEWORKS)
    raise ValueError(f"unknown framework {name!r}; known: {known} (kind names are accepted too, in any case)")
