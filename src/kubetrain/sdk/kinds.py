"""Job kinds by any name users type: ``pytorchjob``, ``pytorchjobs``, ``PyTorchJob``,
``pytorchjob.kubeflow.org``, ``trainjob``.

Every name is derived from the frameworks' models (kind, plural, group, version, scheme name), so a new
framework gets its names without touching this module. Short names are the kind without its ``Job``
suffix (``pytorch``, ``tf``, ``xgboost``, ``paddle``, ``jax``, ``mx``, ``mpi``).

Kubeflow Trainer v2's ``TrainJob`` is a kind of its own generation: no framework (its runtime says how it
trains), no replica map, conditions of its own (``Complete``, ``Failed``, ``Suspended``). It is served beside
the v1 kinds, last, and has no short name (Trainer's CRD has none).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubetrain.api.jobs import TrainingJob
from kubetrain.api.trainer import TrainJob
from kubetrain.frameworks.base import Framework
from kubetrain.frameworks.registry import FRAMEWORKS, framework_for

Job = TrainingJob | TrainJob
"""A job of either API generation, as the SDK reads it back."""

TRAINJOB_CONTAINER = "node"
"""The training container of a TrainJob's nodes (Trainer's name, in every runtime)."""


@dataclass(frozen=True)
class JobKind:
    """One served kind: what the SDK needs to address it on a cluster and to read it back."""

    framework: Framework[Any] | None
    """None for Trainer v2's TrainJob."""

    @property
    def is_trainjob(self) -> bool:
        return self.framework is None

    @property
    def kind(self) -> str:
        return TrainJob.KIND if self.framework is None else self.framework.kind

    @property
    def api_version(self) -> str:
        return TrainJob.API_VERSION if self.framework is None else self.framework.api_version

    @property
    def group(self) -> str:
        return self.api_version.split("/", 1)[0]

    @property
    def version(self) -> str:
        return self.api_version.split("/", 1)[1]

    @property
    def plural(self) -> str:
        return TrainJob.PLURAL if self.framework is None else self.framework.model.PLURAL

    @property
    def model(self) -> type[TrainingJob] | type[TrainJob]:
        return TrainJob if self.framework is None else self.framework.model

    @property
    def v1_framework(self) -> Framework[Any]:
        """The framework of a ``kubeflow.org`` kind; ``ValueError`` for a TrainJob, which has none."""
        if self.framework is None:
            raise ValueError(f"{self.kind} has no framework: its runtime says how it trains")
        return self.framework

    @property
    def short_name(self) -> str:
        lowered = self.kind.lower()
        if self.framework is None:
            return lowered
        return lowered.removesuffix("job") or lowered

    @property
    def default_container(self) -> str:
        return TRAINJOB_CONTAINER if self.framework is None else self.framework.default_container

    def names(self) -> set[str]:
        """Every lower-case spelling that means this kind."""
        singular, plural, group = self.kind.lower(), self.plural, self.group
        scheme = singular if self.framework is None else self.framework.scheme_name
        names = {scheme, singular, plural, self.short_name}
        for base in (singular, plural):
            names |= {f"{base}.{group}", f"{base}.{self.version}.{group}", f"{base}.{group}/{self.version}"}
            names.add(f"{base}/{self.version}")
        return names

    def __str__(self) -> str:
        return self.kind


TRAINJOB = JobKind(None)
KINDS: tuple[JobKind, ...] = (*(JobKind(f) for f in FRAMEWORKS), TRAINJOB)
"""In registry order: the kubeflow.org/v1 MPIJob comes first, so a bare ``mpijob`` means v1; TrainJob last."""


def resolve_kind(name: str) -> JobKind:
    """The kind ``name`` means, in any case; ``ValueError`` listing the known kinds otherwise."""
    wanted = name.strip().lower()
    for kind in KINDS:
        if wanted in kind.names():
            return kind
    raise ValueError(f"unknown job kind {name!r}; known kinds: {known_kinds()}")


def kind_of(job: Job) -> JobKind:
    if isinstance(job, TrainJob):
        return TRAINJOB
    return JobKind(framework_for(job))


def known_kinds() -> str:
    return ", ".join(
        f"{k.kind} ({k.api_version}" + (")" if k.is_trainjob else f", short name {k.short_name!r})")
        for k in KINDS
    )
