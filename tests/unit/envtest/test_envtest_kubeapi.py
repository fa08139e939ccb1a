"""Kubeconfigs resolve to a server, a CA and credentials; unsupported users are named in the error. Writes
survive a webhook call the API server lost on a closed connection; reads, a connection closed unanswered."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
import yaml

from kubetrain.envtest.controlplane import write_kubeconfig
from kubetrain.envtest.kubeapi import ApiError, Connection, KubeApi, KubeconfigError, load_connection
from kubetrain.envtest.pki import ADMIN, generate_pki


def test_written_admin_kubeconfig_resolves_to_the_server_with_the_admin_bearer_token(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path / "pki")
    write_kubeconfig(tmp_path / "admin.kubeconfig", "https://127.0.0.1:6443", pki, ADMIN)

    connection = load_connection(tmp_path / "admin.kubeconfig")

    assert connection.server == "https://127.0.0.1:6443"
    assert connection.headers["Authorization"] == f"Bearer {pki.token(ADMIN)}"


def test_exec_credential_users_are_rejected_with_the_user_named(tmp_path: Path) -> None:
    config = {
        "clusters": [{"name": "c", "cluster": {"server": "https://x", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "cloud", "user": {"exec": {"command": "aws"}}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "cloud"}}],
        "current-context": "ctx",
    }
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(config))
    with pytest.raises(KubeconfigError, match=r"users\[cloud\] uses \['exec'\]"):
        load_connection(path)


def test_missing_context_is_an_error_naming_the_context(tmp_path: Path) -> None:
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump({"current-context": "gone", "contexts": []}))
    with pytest.raises(KubeconfigError, match="contexts has no entry named 'gone'"):
        load_connection(path)


LOST_WEBHOOK_CALL: dict[str, object] = {
    "kind": "Status",
    "reason": "InternalError",
    "message": "Internal error occurred:"
    ' failed calling webhook "validator.trainingruntime.trainer.kubeflow.org": failed to call webhook: Post "https://127.0.0.1:46619/validate":'
    " write tcp 127.0.0.1:54938->127.0.0.1:46619: write: broken pipe",
}
REFUSED_BY_WEBHOOK: dict[str, object] = {
    "kind": "Status",
    "reason": "Forbidden",
    "message": 'admission webhook "validator.trainingruntime.trainer.kubeflow.org" denied the request: bad',
}


def api_answering(answers: list[tuple[int, dict[str, object]]], sent: list[httpx.Request]) -> KubeApi:
    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        code, body = answers[min(len(sent), len(answers)) - 1]
        return httpx.Response(code, json=body)

    connection = Connection(server="https://127.0.0.1:6443", verify=False, headers={})
    return KubeApi(connection, transport=httpx.MockTransport(answer))


def test_a_create_whose_webhook_call_the_api_server_lost_on_a_broken_pipe_is_sent_again() -> None:
    sent: list[httpx.Request] = []
    api = api_answering([(500, LOST_WEBHOOK_CALL), (201, {"metadata": {"name": "rt"}})], sent)

    created = api.create("/apis/x/v1/namespaces/n/things", {"metadata": {"name": "rt"}})

    assert created == {"metadata": {"name": "rt"}}
    assert [json.loads(request.content) for request in sent] == [{"metadata": {"name": "rt"}}] * 2


def test_a_write_a_webhook_refuses_is_not_sent_again() -> None:
    sent: list[httpx.Request] = []
    api = api_answering([(403, REFUSED_BY_WEBHOOK)], sent)

    with pytest.raises(ApiError, match="denied the request"):
        api.patch("/apis/x/v1/namespaces/n/things/rt", {"spec": {}})
    assert len(sent) == 1


def test_a_webhook_call_lost_every_time_fails_the_write_after_three_attempts() -> None:
    sent: list[httpx.Request] = []
    api = api_answering([(500, LOST_WEBHOOK_CALL)], sent)

    with pytest.raises(ApiError, match="broken pipe"):
        api.replace("/apis/x/v1/namespaces/n/things/rt", {"spec": {}})
    assert len(sent) == 3


def api_disconnecting(times: int, sent: list[httpx.Request]) -> KubeApi:
    """An API server that closes the connection without an answer ``times`` times, then answers."""

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        if len(sent) <= times:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        return httpx.Response(200, json={"metadata": {"name": "pi"}})

    connection = Connection(server="https://127.0.0.1:6443", verify=False, headers={})
    return KubeApi(connection, transport=httpx.MockTransport(answer))


def test_a_read_the_server_disconnected_without_answering_is_sent_again() -> None:
    sent: list[httpx.Request] = []
    api = api_disconnecting(1, sent)

    assert api.get("/apis/kubeflow.org/v2beta1/namespaces/n/mpijobs/pi") == {"metadata": {"name": "pi"}}
    assert len(sent) == 2


def test_a_read_disconnected_every_time_fails_after_three_attempts() -> None:
    sent: list[httpx.Request] = []
    api = api_disconnecting(3, sent)

    with pytest.raises(httpx.RemoteProtocolError):
        api.get("/apis/kubeflow.org/v2beta1/namespaces/n/mpijobs/pi")
    assert len(sent) == 3


def test_a_write_the_server_disconnected_without_answering_is_not_sent_again() -> None:
    sent: list[httpx.Request] = []
    api = api_disconnecting(1, sent)

    with pytest.raises(httpx.RemoteProtocolError):
        api.create("/apis/kubeflow.org/v2beta1/namespaces/n/mpijobs", {"metadata": {"name": "pi"}})
    assert len(sent) == 1
