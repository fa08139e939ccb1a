"""A controller's webhooks on loopback: the release's configurations, its kustomize JSON patches applied, sent
to 127.0.0.1 by URL with envtest's CA; the serving certificate that CA signs for it."""

from __future__ import annotations

import base64
import ssl
from pathlib import Path

import pytest
from cryptography import x509

from kubetrain.envtest import webhooks
from kubetrain.envtest.pki import generate_pki, issue_serving_certificate

MANIFESTS = """\
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- name: mthing.example.io
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-thing}
  rules: [{apiGroups: [example.io], apiVersions: [v1], operations: [CREATE], resources: [things]}]
- name: mpod.example.io
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}
  rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
---
apiVersion: v1
kind: Service
metadata: {name: webhook-service}
"""

POD_SELECTOR_PATCH = """\
- op: add
  path: /webhooks/1/objectSelector
  value:
    matchExpressions: [{key: example.io/owned, operator: Exists}]
- op: replace
  path: /metadata/name
  value: renamed
"""


def _read(tmp_path: Path, patch: str | None = POD_SELECTOR_PATCH) -> list[dict[str, object]]:
    (tmp_path / "manifests.yaml").write_text(MANIFESTS)
    patches = []
    if patch is not None:
        (tmp_path / "patch.yaml").write_text(patch)
        patches.append(("MutatingWebhookConfiguration", None, tmp_path / "patch.yaml"))
    return webhooks.read_configurations(tmp_path / "manifests.yaml", patches)


def test_only_webhook_configurations_are_read_with_the_kustomize_patches_applied(tmp_path: Path) -> None:
    [configuration] = _read(tmp_path)

    assert configuration["metadata"] == {"name": "renamed"}
    pod_webhook = configuration["webhooks"][1]  # type: ignore[index]
    assert pod_webhook["objectSelector"] == {
        "matchExpressions": [{"key": "example.io/owned", "operator": "Exists"}]
    }


def test_a_patch_replacing_what_is_not_there_is_refused_naming_the_path() -> None:
    with pytest.raises(webhooks.WebhookError, match="/webhooks/3/name"):
        webhooks.json_patch({"webhooks": []}, [{"op": "replace", "path": "/webhooks/3/name", "value": "x"}])


def test_each_webhook_is_sent_to_loopback_by_url_with_its_service_path_and_the_ca(tmp_path: Path) -> None:
    [configuration] = _read(tmp_path, patch=None)

    loopback = webhooks.on_loopback(
        configuration, "https://127.0.0.1:9443", b"CA PEM", name="example-mutating"
    )

    assert loopback["metadata"] == {"name": "example-mutating"}
    assert [w["clientConfig"] for w in loopback["webhooks"]] == [
        {"url": "https://127.0.0.1:9443/mutate-thing", "caBundle": base64.b64encode(b"CA PEM").decode()},
        {"url": "https://127.0.0.1:9443/mutate--v1-pod", "caBundle": base64.b64encode(b"CA PEM").decode()},
    ]
    assert configuration["webhooks"][0]["clientConfig"]["service"]["path"] == "/mutate-thing"  # type: ignore[index]


def test_a_namespace_selector_limits_every_webhook_to_those_namespaces(tmp_path: Path) -> None:
    [configuration] = _read(tmp_path, patch=None)

    loopback = webhooks.on_loopback(
        configuration, "https://127.0.0.1:1", b"", namespace_selector=webhooks.namespaces("peer-b", "peer-a")
    )

    expected = {
        "matchExpressions": [
            {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["peer-a", "peer-b"]}
        ]
    }
    assert [w["namespaceSelector"] for w in loopback["webhooks"]] == [expected, expected]


def test_the_serving_certificate_is_signed_by_envtests_ca_for_loopback(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path / "pki")

    directory = issue_serving_certificate(pki, tmp_path / "certs")

    certificate = x509.load_pem_x509_certificate((directory / "tls.crt").read_bytes())
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert certificate.issuer == x509.load_pem_x509_certificate(pki.ca_cert.read_bytes()).subject
    assert (directory / "ca.crt").read_bytes() == pki.ca_cert.read_bytes()
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(directory / "tls.crt", directory / "tls.key")  # raises unless the key matches
