"""The Python SDK (``TrainingClient``) over a cluster or local runs."""
