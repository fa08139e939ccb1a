"""What a migration gives: the TrainJob, the runtime it needs, and what did not carry over."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubetrain.api.errors import FieldError
from kubetrain.api.trainer import TrainingRuntime, TrainJob


@dataclass(frozen=True)
class Note:
    """One thing about the v1 job that the TrainJob does differently or not at all, and why."""

    field: str
    """The v1 field it is about (wire path), e.g. ``spec.elasticPolicy``."""
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


@dataclass(frozen=True)
class Migration:
    trainjob: TrainJob
    runtime: TrainingRuntime | None
    """The namespaced runtime made for this job; None when the TrainJob runs on a built-in one."""
    notes: tuple[Note, ...] = field(default=())

    def documents(self) -> list[dict[str, Any]]:
        """The manifests to apply, in order: the runtime the TrainJob names comes first."""
        runtime = [self.runtime.to_wire()] if self.runtime is not None else []
        trainjob = {k: v for k, v in self.trainjob.to_wire().items() if k != "status"}
        return [*runtime, trainjob]


class NotMigratableError(ValueError):
    """A v1 job no TrainJob can run as it ran; ``reasons`` name the fields and say why."""

    def __init__(self, reasons: list[FieldError]) -> None:
        self.reasons = reasons
        super().__init__("; ".join(str(r) for r in reasons))
