"""kubetrain: Kubeflow training jobs on Kubernetes or on one machine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from kubetrain.sdk.client import TrainingClient

__all__ = ["TrainingClient", "__version__"]


def __getattr__(name: str) -> Any:
    # The SDK pulls in pydantic models and lightkube: import it only when asked, so `import kubetrain`
    # (and the CLI's start) stays cheap.
    if name == "TrainingClient":
        from kubetrain.sdk.client import TrainingClient

        return TrainingClient
    raise AttributeError(f"module 'kubetrain' has no attribute {name!r}")
