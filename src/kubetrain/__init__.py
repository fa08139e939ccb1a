"""kubetrain: Kubeflow training jobs on Kubernetes or on one machine."""

__version__ = "0.1.0"
