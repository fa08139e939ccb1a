"""Arguments TrainingClient rejects before touching any backend, with upstream's ValueError."""

from __future__ import annotations

from pathlib import Path

import pytest

from builders import container, manifest
from kubetrain.api.errors import InvalidJobError
from kubetrain.sdk import BackendUnavailableError, TrainingClient
from kubetrain.sdk.client import _delete_options


@pytest.fixture
def client(tmp_path: Path) -> TrainingClient:
    return TrainingClient(backend="local", state_dir=tmp_path)


def test_expected_conditions_must_be_known_conditions(client: TrainingClient) -> None:
    with pytest.raises(ValueError, match="must be a subset of"):
        client.wait_for_job_conditions("j", expected_conditions={"Done"})


def test_an_unknown_backend_is_a_value_error_naming_the_backends(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="kubernetes, local"):
        TrainingClient(backend="slurm")


def test_an_unknown_default_kind_is_a_value_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown job kind"):
        TrainingClient(backend="local", state_dir=tmp_path, job_kind="SparkJob")


def test_a_job_object_cannot_be_combined_with_a_function(client: TrainingClient) -> None:
    with pytest.raises(ValueError, match="only namespace"):
        client.create_job({"kind": "PyTorchJob"}, train_func=print)


def test_create_needs_a_job_a_function_or_an_image(client: TrainingClient) -> None:
    with pytest.raises(ValueError, match="job, train_func or base_image"):
        client.create_job(name="nothing")


def test_local_runs_live_in_the_default_namespace(client: TrainingClient) -> None:
    assert client.namespace == "default"


def test_delete_options_may_be_a_dict_or_a_v1_delete_options_like_object() -> None:
    class V1DeleteOptions:
        propagation_policy = "Orphan"
        grace_period_seconds = 5

    assert _delete_options({"propagationPolicy": "Foreground"}) == ("Foreground", None)
    assert _delete_options(V1DeleteOptions()) == ("Orphan", 5)


def test_an_unknown_propagation_policy_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="Background, Foreground, Orphan"):
        _delete_options({"propagationPolicy": "Later"})


def test_a_missing_kubeconfig_is_backend_unavailable_naming_the_fixes(tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailableError, match="set KUBECONFIG or pass --kubeconfig"):
        TrainingClient(config_file=str(tmp_path / "absent"))


def test_the_namespace_defaults_to_the_kubeconfig_contexts(tmp_path: Path) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: k, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u, namespace: team-a}}]\n"
    )
    assert TrainingClient(config_file=str(config)).namespace == "team-a"


def test_a_client_configuration_of_another_library_is_a_value_error() -> None:
    class Configuration:
        host = "https://example.com"

    with pytest.raises(ValueError, match="lightkube KubeConfig or SingleConfig, got Configuration"):
        TrainingClient(client_configuration=Configuration())


def test_create_job_refuses_a_malformed_job_naming_the_field_before_any_backend_call(
    client: TrainingClient,
) -> None:
    bad = manifest("PyTorchJob", {"Master": 1, "Worker": 1}, containers=[container("pytorch", env=[-1])])
    with pytest.raises(InvalidJobError) as raised:
        client.create_job(job=bad)
    assert [e.path for e in raised.value.errors] == [
        "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].env[0]",
        "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].env[0]",
    ]


def test_create_job_refuses_more_replicas_than_any_cluster_can_run(client: TrainingClient) -> None:
    with pytest.raises(InvalidJobError, match=r"spec\.pytorchReplicaSpecs\.Worker\.replicas"):
        client.create_job(job=manifest("PyTorchJob", {"Master": 1, "Worker": 100_000_000}))
