"""Job kinds by any name users type: ``pytorchjob``, ``pytorchjobs``, ``PyTorchJob``,
``pytorchjob.kubeflow.org``.

Every name is derived from the frameworks' models (kind, plural, group, version, scheme name), so a new
framework gets its names without touching this module. Short names are the kind without its ``Job``
suffix (``pytorch``, ``tf``, ``xgboost``, ``paddle``, ``jax``, ``mx``, ``mpi``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubetrain.api.jobs import TrainingJob
from kubetrain.frameworks.base import Framework
from kubetrain.frameworks.registry import FRAMEWORKS, framework_for


@dataclass(frozen=True)
class JobKind:
    """One served kind: what the SDK needs to address it on a cluster and to read it back."""

    framework: Framework[Any]

    @property
    def kind(self) -> str:
        return self.framework.kind

    @property
    def api_version(self) -> str:
        return self.framework.api_version

    @property
    def group(self) -> str:
        return self.api_version.split("/", 1)[0]

    @property
    def version(self) -> str:
        return self.api_version.split("/", 1)[1]

    @property
    def plural(self) -> str:
        return self.framework.model.PLURAL

    @property
    def model(self) -> type[TrainingJob]:
        return self.framework.model

    @property
    def short_name(self) -> str:
        lowered = self.kind.lower()
        return lowered.removesuffix("job") or lowered

    @property
    def default_container(self) -> str:
        return self.framework.default_container

    def names(self) -> set[str]:
        """Every lower-case spelling that means this kind."""
        singular, plural, group = self.kind.lower(), self.plural, self.group
        names = {self.framework.scheme_name, singular, plural, self.short_name}
        for base in (singular, plural):
            names |= {f"{base}.{group}", f"{base}.{self.version}.{group}", f"{base}.{group}/{self.version}"}
            names.add(f"{base}/{self.version}")
        return names

    def __str__(self) -> str:
        return self.kind


KINDS: tuple[JobKind, ...] = tuple(JobKind(f) for f in FRAMEWORKS)
"""In registry order: the kubeflow.org/v1 MPIJob comes first, so a bare ``mpijob`` means v1."""


def resolve_kind(name: str) -> JobKind:
    """The kind ``name`` means, in any case; ``ValueError`` listing the known kinds otherwise."""
    wanted = name.strip().lower()
    for kind in KINDS:
        if wanted in kind.names():
            return kind
    raise ValueError(f"unknown job kind {name!r}; known kinds: {known_kinds()}")


def kind_of(job: TrainingJob) -> JobKind:
    return JobKind(framework_for(job))


def known_kinds() -> str:
    return ", ".join(f"{k.kind} ({k.api_version}, short name {k.short_name!r})" for k in KINDS)
