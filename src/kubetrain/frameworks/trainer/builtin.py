"""The ClusterTrainingRuntimes kubetrain ships: Kubeflow Trainer v2.3.0's built-in ones, under their upstream
names and labels (``runtimes/``, generated from the pinned Trainer module by ``tools/trainer/runtimes.py``).
The operator installs them; ``kubetrain run`` resolves a TrainJob's ``runtimeRef`` against them when no
runtime file is named."""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

from kubetrain.api.trainer import ClusterTrainingRuntime


@functools.cache
def builtin_runtime_documents() -> tuple[dict[str, Any], ...]:
    """Each built-in runtime as its manifest (what ``kubectl apply`` takes)."""
    import yaml

    folder = resources.files(__package__).joinpath("runtimes")
    documents = [
        yaml.safe_load(entry.read_text())
        for entry in sorted(folder.iterdir(), key=lambda entry: entry.name)
        if entry.name.endswith(".yaml")
    ]
    return tuple(documents)


def builtin_runtimes() -> dict[str, ClusterTrainingRuntime]:
    """Every built-in runtime by name."""
    found = (ClusterTrainingRuntime.model_validate(document) for document in builtin_runtime_documents())
    return {runtime.name: runtime for runtime in found}
