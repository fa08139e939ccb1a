"""The JobSet controller beside envtest: pinned at the release Kubeflow Trainer v2.3.0 requires, run with its
webhooks on loopback and its cert manager off, its webhook configurations the release's."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import yaml

from kubetrain.envtest import jobset

CHECKOUT = Path(__file__).resolve().parents[3]


def test_jobset_is_pinned_at_the_version_the_trainer_peer_requires() -> None:
    trainer_go_mod = (CHECKOUT / "tools" / "trainer" / "go.mod").read_text()
    [required] = re.findall(r"^\s*sigs\.k8s\.io/jobset (v\S+)", trainer_go_mod, re.MULTILINE)
    assert jobset.version() == required == "v0.12.0"


def test_the_controller_serves_its_webhooks_on_loopback_with_its_cert_manager_off(tmp_path: Path) -> None:
    config = yaml.safe_load(jobset.configuration(9443, 8081, tmp_path))

    assert config["webhook"] == {"port": 9443, "host": "127.0.0.1", "certDir": str(tmp_path)}
    assert config["internalCertManagement"] == {"enable": False}
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["metrics"] == {"bindAddress": "0"}


def test_the_releases_webhooks_are_sent_to_loopback_its_pod_webhooks_only_for_jobset_pods() -> None:
    configurations = jobset.webhook_configurations(9443, b"CA")

    assert sorted(c["metadata"]["name"] for c in configurations) == [
        "jobset-mutating-webhook-configuration",
        "jobset-validating-webhook-configuration",
    ]
    webhooks = [w for c in configurations for w in c["webhooks"]]
    assert {w["clientConfig"]["url"] for w in webhooks} == {
        "https://127.0.0.1:9443/mutate-jobset-x-k8s-io-v1alpha2-jobset",
        "https://127.0.0.1:9443/mutate--v1-pod",
        "https://127.0.0.1:9443/validate-jobset-x-k8s-io-v1alpha2-jobset",
        "https://127.0.0.1:9443/validate--v1-pod",
    }
    assert {w["clientConfig"]["caBundle"] for w in webhooks} == {base64.b64encode(b"CA").decode()}
    for webhook in webhooks:
        if webhook["rules"][0]["resources"] == ["pods"]:
            selector = {"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}
            assert webhook["objectSelector"] == {"matchExpressions": [selector]}
