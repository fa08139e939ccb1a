"""A local run's status endpoint (local/status_endpoint.py): tokens per replica, where the files go, what each
replica is given, and how a container reaches the endpoint."""

from __future__ import annotations

import json
import stat
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from builders import container, job
from kubetrain.api.jobs import TrainingJob
from kubetrain.api.progress import StatusTarget, TrainerStatus
from kubetrain.engine.admission import admit
from kubetrain.engine.planning import plan_replica
from kubetrain.frameworks.addressing import ClusterAddressing
from kubetrain.local.container_run import Engine, container_run, run_argv, with_reporting
from kubetrain.local.containers import network_gateway
from kubetrain.local.status_access import PROCESS_ACCESS, ReporterAccess, status_target, status_url
from kubetrain.local.status_endpoint import RunStatusEndpoint, RunTokens
from kubetrain.progress.server import RefusedError, Reporter

TARGET = StatusTarget("kubeflow.org/v1", "team", "pytorchjobs", "ddp")


def ddp() -> TrainingJob:
    main = container("pytorch", image="localhost/kubetrain/pytorch:2.13.0", command=["python", "train.py"])
    return admit(
        job("PyTorchJob", {"Master": 1, "Worker": 1}, name="ddp", namespace="team", containers=[main])
    )


class Sink:
    def __init__(self) -> None:
        self.accepted: list[tuple[StatusTarget, TrainerStatus, Reporter]] = []

    def accept(self, target: StatusTarget, status: TrainerStatus, reporter: Reporter) -> None:
        self.accepted.append((target, status, reporter))


def test_the_status_path_is_the_jobs_as_on_a_cluster() -> None:
    assert status_target(ddp()) == TARGET
    assert status_url("127.0.0.1", 8443, TARGET) == (
        "https://127.0.0.1:8443/apis/kubeflow.org/v1/namespaces/team/pytorchjobs/ddp/status"
    )
    assert status_url("fd00::1", 8443, TARGET).startswith("https://[fd00::1]:8443/")


async def test_a_token_names_its_replica_for_its_own_jobs_path_only() -> None:
    tokens = RunTokens(TARGET, {"master-0": "m-token", "worker-0": "w-token"})
    assert await tokens.authenticate("w-token", TARGET) == Reporter("worker-0")
    with pytest.raises(RefusedError) as unknown:
        await tokens.authenticate("guessed", TARGET)
    assert unknown.value.code == 403
    other = StatusTarget("kubeflow.org/v1", "team", "pytorchjobs", "other")
    with pytest.raises(RefusedError) as elsewhere:
        await tokens.authenticate("m-token", other)
    assert (elsewhere.value.code, elsewhere.value.message) == (
        403,
        f"the token of master-0 may only report for {TARGET.path}, not for {other.path}",
    )


async def test_the_endpoint_writes_each_replicas_ca_and_private_token_and_serves_until_stopped(
    tmp_path: Path,
) -> None:
    sink = Sink()
    endpoint = RunStatusEndpoint(ddp(), ["master-0", "worker-0"], tmp_path / "progress", sink)
    await endpoint.start(PROCESS_ACCESS)
    try:
        access = endpoint.access("worker-0")
        assert access.url.startswith("https://127.0.0.1:")
        assert access.url.endswith(TARGET.path)
        assert stat.S_IMODE((tmp_path / "progress").stat().st_mode) == 0o700
        assert stat.S_IMODE(access.directory.stat().st_mode) == 0o700
        assert stat.S_IMODE(access.token_file.stat().st_mode) == 0o600
        assert access.ca_file.read_text().startswith("-----BEGIN CERTIFICATE-----")
        assert access.token_file.read_text() != endpoint.access("master-0").token_file.read_text()
        code = await _post(access, {"trainerStatus": {"progressPercentage": 30}})
        assert code == 200
        with pytest.raises(urllib.error.HTTPError) as other_kind:
            await _post(access, {}, access.url.replace("/pytorchjobs/", "/tfjobs/"))
        assert other_kind.value.code == 404, "the run serves its own kind's path alone"
    finally:
        await endpoint.stop()
    [(target, status, reporter)] = sink.accepted
    assert (target, status.progress_percentage, reporter) == (TARGET, 30, Reporter("worker-0"))
    with pytest.raises(urllib.error.URLError):
        await _post(access, {"trainerStatus": {"progressPercentage": 40}})


async def _post(access: ReporterAccess, body: object, url: str | None = None) -> int:
    import asyncio
    import ssl

    request = urllib.request.Request(
        url or access.url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {access.token_file.read_text()}"},
        method="POST",
    )
    context = ssl.create_default_context(cafile=str(access.ca_file))
    answer = await asyncio.to_thread(urllib.request.urlopen, request, context=context, timeout=10)
    return int(answer.status)


def test_a_process_gets_the_files_where_they_are_and_a_container_where_they_are_mounted() -> None:
    access = ReporterAccess("https://h:1/x", Path("/state/ddp/progress/worker-0"))
    assert access.host_env() == {
        "KUBEFLOW_TRAINER_SERVER_URL": "https://h:1/x",
        "KUBEFLOW_TRAINER_SERVER_CA_CERT": "/state/ddp/progress/worker-0/ca.crt",
        "KUBEFLOW_TRAINER_SERVER_TOKEN": "/state/ddp/progress/worker-0/token",
    }
    assert access.container_env() == {
        "KUBEFLOW_TRAINER_SERVER_URL": "https://h:1/x",
        "KUBEFLOW_TRAINER_SERVER_CA_CERT": "/var/run/secrets/kubeflow/trainer/ca.crt",
        "KUBEFLOW_TRAINER_SERVER_TOKEN": "/var/run/secrets/kubeflow/trainer/token",
    }


def test_a_container_reaches_the_endpoint_by_the_engines_host_name_pointed_at_the_network_gateway() -> None:
    the_job = ddp()
    plan = plan_replica(the_job, "Worker", 0, ClusterAddressing())
    run = container_run(plan, the_job, labels={}, volumes_dir=Path("/state/ddp/volumes"))
    url = status_url("host.containers.internal", 40123, TARGET)
    access = ReporterAccess(url, Path("/state/ddp/progress/worker-0"))
    argv = run_argv(
        Engine.PODMAN, "podman", with_reporting(run, access, ("host.containers.internal", "10.89.0.1"))
    )
    assert argv[argv.index("--add-host") + 1] == "host.containers.internal:10.89.0.1"
    assert "/state/ddp/progress/worker-0:/var/run/secrets/kubeflow/trainer:ro" in argv
    env = [argv[position + 1] for position, flag in enumerate(argv) if flag == "--env"]
    assert env[-3:] == [  # after the container's own
        f"KUBEFLOW_TRAINER_SERVER_URL={url}",
        "KUBEFLOW_TRAINER_SERVER_CA_CERT=/var/run/secrets/kubeflow/trainer/ca.crt",
        "KUBEFLOW_TRAINER_SERVER_TOKEN=/var/run/secrets/kubeflow/trainer/token",
    ]


def test_the_gateway_is_read_from_either_engines_network_inspect() -> None:
    podman = {"name": "kubetrain-ddp", "subnets": [{"subnet": "10.89.0.0/24", "gateway": "10.89.0.1"}]}
    docker = {
        "Name": "kubetrain-ddp",
        "IPAM": {"Config": [{"Subnet": "172.18.0.0/16", "Gateway": "172.18.0.1"}]},
    }
    assert network_gateway(podman) == "10.89.0.1"
    assert network_gateway(docker) == "172.18.0.1"
    assert network_gateway({"subnets": []}) is None
    assert network_gateway("not a network") is None
