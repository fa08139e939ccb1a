"""A replica's plan becomes the ``podman run`` / ``docker run`` that starts its pod's container."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from builders import cli_runner, container, job
from kubetrain.api.errors import InvalidJobError
from kubetrain.api.jobs import TrainingJob
from kubetrain.cli.main import app
from kubetrain.engine.admission import admit
from kubetrain.engine.planning import plan_replica
from kubetrain.frameworks.addressing import ClusterAddressing
from kubetrain.local.container_run import (
    ContainerRun,
    Engine,
    PullPolicy,
    container_run,
    cpus_flag,
    memory_flag,
    pull_policy,
    replica_argv,
    run_argv,
)

VOLUMES = Path("/state/ddp/volumes")


def ddp(**container_fields: Any) -> TrainingJob:
    main = container("pytorch", image="localhost/kubetrain/pytorch:2.13.0", **container_fields)
    return admit(
        job("PyTorchJob", {"Master": 1, "Worker": 1}, name="ddp", namespace="team", containers=[main])
    )


def run_of(
    the_job: TrainingJob, replica_type: str = "Worker", index: int = 0, **options: Any
) -> ContainerRun:
    plan = plan_replica(the_job, replica_type, index, ClusterAddressing())
    return container_run(plan, the_job, labels={"kubetrain.io/run-id": "r1"}, volumes_dir=VOLUMES, **options)


def test_a_worker_runs_its_image_command_and_the_cluster_env_on_the_job_network() -> None:
    the_job = ddp(
        command=["python", "train.py"], args=["--steps", "$(WORLD_SIZE)"], workingDir="/opt/kubetrain"
    )
    argv = run_argv(Engine.PODMAN, "podman", run_of(the_job))
    assert argv == [
        "podman", "run", "--name", "ddp-worker-0", "--hostname", "ddp-worker-0",
        "--network", "kubetrain-ddp",
        "--network-alias", "ddp-worker-0",
        "--network-alias", "ddp-worker-0.ddp",
        "--network-alias", "ddp-worker-0.team.svc",
        "--network-alias", "ddp-worker-0.ddp.team.svc",
        "--label", "kubetrain.io/replica=worker-0",
        "--label", "kubetrain.io/run-id=r1",
        "--label", "training.kubeflow.org/job-name=ddp",
        "--label", "training.kubeflow.org/operator-name=pytorchjob-controller",
        "--label", "training.kubeflow.org/replica-index=0",
        "--label", "training.kubeflow.org/replica-type=worker",
        "--pull", "missing",
        "--workdir", "/opt/kubetrain",
        "--env", "PYTHONUNBUFFERED=1",
        "--env", "MASTER_PORT=23456",
        "--env", "PET_MASTER_PORT=23456",
        "--env", "MASTER_ADDR=ddp-master-0",
        "--env", "PET_MASTER_ADDR=ddp-master-0",
        "--env", "WORLD_SIZE=2",
        "--env", "RANK=1",
        "--env", "PET_NODE_RANK=1",
        "--env", "PET_NPROC_PER_NODE=auto",
        "--env", "PET_NNODES=2",
        "--entrypoint", "python",
        "localhost/kubetrain/pytorch:2.13.0", "train.py", "--steps", "2",
    ]  # fmt: skip


def test_the_command_replaces_the_entrypoint_and_args_follow_the_image() -> None:
    run = run_of(ddp(command=["torchrun", "--nnodes", "2"], args=["train.py"]))
    assert (run.entrypoint, run.args) == ("torchrun", ("--nnodes", "2", "train.py"))


def test_args_without_a_command_replace_only_the_image_cmd() -> None:
    argv = run_argv(Engine.PODMAN, "podman", run_of(ddp(args=["train.py"])))
    assert "--entrypoint" not in argv
    assert argv[-2:] == ["localhost/kubetrain/pytorch:2.13.0", "train.py"]


def test_docker_takes_the_same_arguments_as_podman() -> None:
    run = run_of(ddp(command=["python", "train.py"]))
    assert run_argv(Engine.DOCKER, "docker", run)[1:] == run_argv(Engine.PODMAN, "podman", run)[1:]


@pytest.mark.parametrize(
    ("image", "written", "expected"),
    [
        ("pytorch/pytorch:2.5.1-cpu", None, PullPolicy.MISSING),
        ("pytorch/pytorch", None, PullPolicy.ALWAYS),
        ("pytorch/pytorch:latest", None, PullPolicy.ALWAYS),
        ("localhost:5000/pytorch", None, PullPolicy.ALWAYS),
        ("pytorch/pytorch@sha256:abc", None, PullPolicy.MISSING),
        ("pytorch/pytorch:latest", "Never", PullPolicy.NEVER),
        ("pytorch/pytorch:1", "Always", PullPolicy.ALWAYS),
        ("pytorch/pytorch", "IfNotPresent", PullPolicy.MISSING),
    ],
)
def test_image_pull_policy_is_honoured_with_the_api_servers_default(
    image: str, written: str | None, expected: PullPolicy
) -> None:
    fields = {"image": image} | ({"imagePullPolicy": written} if written else {})
    assert pull_policy(fields) is expected


def test_limits_become_cpus_and_memory() -> None:
    run = run_of(ddp(resources={"limits": {"cpu": "500m", "memory": "1Gi"}}))
    argv = run_argv(Engine.PODMAN, "podman", run)
    assert argv[argv.index("--cpus") + 1] == "0.5"
    assert argv[argv.index("--memory") + 1] == str(2**30)


@pytest.mark.parametrize(
    ("quantity", "cpus"), [("2", "2"), ("1500m", "1.5"), ("0.25", "0.25"), ("1e1", "10")]
)
def test_cpu_quantities_are_decimal_cores(quantity: str, cpus: str) -> None:
    assert cpus_flag(quantity) == cpus


@pytest.mark.parametrize(
    ("quantity", "size"), [("128Mi", 128 * 2**20), ("1G", 10**9), ("1500", 1500), ("1.5Ki", 1536)]
)
def test_memory_quantities_are_bytes(quantity: str, size: int) -> None:
    assert memory_flag(quantity) == size


def test_an_unreadable_limit_names_the_field() -> None:
    with pytest.raises(InvalidJobError) as raised:
        run_of(ddp(resources={"limits": {"cpu": "lots"}}))
    assert "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.limits" in str(raised.value)


def test_gpus_are_cdi_devices_for_podman_and_a_device_list_for_docker() -> None:
    run = run_of(ddp(), gpus=["2", "3"])
    podman = run_argv(Engine.PODMAN, "podman", run)
    docker = run_argv(Engine.DOCKER, "docker", run)
    assert [podman[i + 1] for i, a in enumerate(podman) if a == "--device"] == [
        "nvidia.com/gpu=2",
        "nvidia.com/gpu=3",
    ]
    assert docker[docker.index("--gpus") + 1] == '"device=2,3"'


def with_volumes(
    the_job: TrainingJob, volumes: list[dict[str, Any]], mounts: list[dict[str, Any]]
) -> TrainingJob:
    wire = the_job.to_wire()
    for spec in wire["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["volumes"] = volumes
        spec["template"]["spec"]["containers"][0]["volumeMounts"] = mounts
    changed: TrainingJob = type(the_job).model_validate(wire)
    return admit(changed)


def test_an_empty_dir_is_a_directory_of_the_replica_and_a_host_path_a_bind_mount() -> None:
    the_job = with_volumes(
        ddp(),
        [{"name": "scratch", "emptyDir": {}}, {"name": "data", "hostPath": {"path": "/srv/data"}}],
        [
            {"name": "scratch", "mountPath": "/scratch"},
            {"name": "data", "mountPath": "/data", "readOnly": True, "subPath": "mnist"},
        ],
    )
    run = run_of(the_job)
    argv = run_argv(Engine.PODMAN, "podman", run)
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--volume"] == [
        "/state/ddp/volumes/worker-0/scratch:/scratch",
        "/srv/data/mnist:/data:ro",
    ]
    assert run.emptydirs == ("/state/ddp/volumes/worker-0/scratch",)


def test_the_frameworks_config_map_is_the_runs_copy_and_any_other_is_an_error() -> None:
    volumes = [{"name": "cfg", "configMap": {"name": "ddp-config"}}]
    the_job = with_volumes(ddp(), volumes, [{"name": "cfg", "mountPath": "/etc/mpi"}])
    run = run_of(the_job, config_mount=("/etc/mpi", Path("/state/ddp/config")))
    assert [m.source for m in run.mounts] == ["/state/ddp/config"]
    with pytest.raises(InvalidJobError) as raised:
        run_of(the_job)
    assert (
        "spec.pytorchReplicaSpecs.Worker.template.spec.volumes[0]: configMap has no local equivalent"
        in str(raised.value)
    )


def test_the_jobs_generated_secret_is_its_keys_as_files_with_the_volumes_modes_mounted_read_only() -> None:
    secret = {
        "secretName": "ddp-ssh",
        "defaultMode": 0o600,
        "items": [
            {"key": "ssh-privatekey", "path": "id_rsa"},
            {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": 0o644},
        ],
    }
    the_job = with_volumes(
        ddp(), [{"name": "keys", "secret": secret}], [{"name": "keys", "mountPath": "/root/.ssh"}]
    )
    data = {"ssh-privatekey": b"private", "ssh-publickey": b"public"}

    run = run_of(the_job, secrets={"ddp-ssh": data})

    assert [(m.source, m.target, m.read_only) for m in run.mounts] == [
        ("/state/ddp/volumes/worker-0/keys", "/root/.ssh", True)
    ]
    assert [(f.path, f.content, oct(f.mode)) for f in run.files] == [
        ("/state/ddp/volumes/worker-0/keys/id_rsa", b"private", "0o600"),
        ("/state/ddp/volumes/worker-0/keys/id_rsa.pub", b"public", "0o644"),
    ]


def test_a_secret_the_job_does_not_generate_has_no_local_equivalent() -> None:
    volumes = [{"name": "token", "secret": {"secretName": "team-token"}}]
    the_job = with_volumes(ddp(), volumes, [{"name": "token", "mountPath": "/var/run/token"}])
    with pytest.raises(InvalidJobError) as raised:
        run_of(the_job, secrets={"ddp-ssh": {"ssh-privatekey": b"private"}})
    assert "spec.pytorchReplicaSpecs.Worker.template.spec.volumes[0]: secret has no local equivalent" in str(
        raised.value
    )


def test_plan_with_a_container_runtime_shows_each_replicas_run_line() -> None:
    manifest = Path(__file__).resolve().parents[3] / "examples" / "pytorch-ddp" / "job.yaml"
    result = cli_runner().invoke(
        app, ["plan", str(manifest), "-t", "local", "--runtime", "podman", "-o", "json"]
    )
    assert result.exit_code == 0, result.output
    worker = json.loads(result.output)[1]
    assert worker["container"] == "pytorch-ddp-worker-0"
    assert worker["env"]["MASTER_ADDR"] == "pytorch-ddp-master-0"
    assert "--network-alias pytorch-ddp-worker-0.pytorch-ddp" in worker["run"]
    assert worker["run"].endswith(
        "--entrypoint python localhost/kubetrain/pytorch:2.13.0 examples/pytorch-ddp/train_ddp.py --steps 60 "
        "--checkpoint-dir .state/checkpoints/pytorch-ddp"
    )


def test_an_mpi_v2_container_gets_the_pod_decoration_the_operator_adds_ssh_keys_hostfile_and_sshd() -> None:
    manifest = Path(__file__).resolve().parents[3] / "examples" / "mpi" / "job.yaml"
    result = cli_runner().invoke(
        app, ["plan", str(manifest), "-t", "local", "--runtime", "podman", "-o", "json"]
    )
    assert result.exit_code == 0, result.output
    by_replica = {r["replica"]: r for r in json.loads(result.output)}
    assert by_replica["worker-0"]["command"] == ["/usr/sbin/sshd", "-De"]
    assert "/ssh-auth:/root/.ssh:ro" in by_replica["worker-0"]["run"]
    assert "/config:/etc/mpi:ro" in by_replica["launcher-0"]["run"]
    assert "/ssh-auth:/root/.ssh:ro" in by_replica["launcher-0"]["run"]


def test_init_containers_run_to_completion_in_order_before_the_main_container_and_share_its_volumes() -> None:
    the_job = with_volumes(
        ddp(), [{"name": "scratch", "emptyDir": {}}], [{"name": "scratch", "mountPath": "/s"}]
    )
    data = the_job.to_wire()
    worker = data["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    worker["initContainers"] = [
        {
            "name": "fetch",
            "image": "localhost/kubetrain/busybox:1.35",
            "command": ["sh", "-c", "echo ready > /s/flag"],
            "volumeMounts": [{"name": "scratch", "mountPath": "/s"}],
        }
    ]
    run = run_of(admit(type(the_job).model_validate(data)))

    (init,) = run.init
    assert (init.name, init.hostname, init.aliases) == ("ddp-worker-0-init-fetch", "ddp-worker-0", ())
    assert init.mounts == run.mounts
    argv = replica_argv(Engine.PODMAN, "podman", run)
    assert argv[:2] == ["/bin/sh", "-c"]
    first, main = argv[2].split("; ")
    assert first.startswith("podman run --rm --name ddp-worker-0-init-fetch --hostname ddp-worker-0 ")
    assert first.endswith(" || exit $?")
    assert main == "exec " + shlex.join(run_argv(Engine.PODMAN, "podman", run))


def test_a_replica_without_init_containers_is_its_run_alone() -> None:
    run = run_of(ddp(command=["python", "train.py"]))
    assert replica_argv(Engine.PODMAN, "podman", run) == run_argv(Engine.PODMAN, "podman", run)
