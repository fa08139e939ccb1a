"""kubeflow.org API models, defaulting helpers, validation helpers and CRD generation."""
