"""The Kubernetes substrate: controller runtime and the translation of engine actions to API calls."""
