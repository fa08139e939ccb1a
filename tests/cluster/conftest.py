"""The cluster tier: tests against a real control plane (envtest), with the pod driver playing the kubelet."""

from __future__ import annotations

from kubetrain.envtest.pytest_plugin import (  # noqa: F401  (fixtures are found by name)
    _session_pod_driver,
    envtest,
    kube_api,
    namespace,
    pod_driver,
)
