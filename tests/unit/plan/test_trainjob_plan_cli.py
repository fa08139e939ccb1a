"""``kubetrain plan`` of a Kubeflow Trainer TrainJob: on Kubernetes what the operator applies (the runtime
snapshot, Trainer's companions, the JobSet), locally each node's process as ``kubetrain run`` starts it, the
runtime found as ``kubetrain run`` finds it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from builders import cli_runner
from kubetrain.cli.main import app

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "trainjob" / "torch-ddp.yaml"
RUNTIME = {
    "apiVersion": "trainer.kubeflow.org/v1alpha1",
    "kind": "TrainingRuntime",
    "metadata": {"name": "mine"},
    "spec": {
        "mlPolicy": {"numNodes": 1, "torch": {}},
        "template": {
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "template": {
                            "metadata": {
                                "labels": {"trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}
                            },
                            "spec": {
                                "template": {"spec": {"containers": [{"name": "node", "image": "mine:1"}]}}
                            },
                        },
                    }
                ]
            }
        },
    },
}


def planned(*args: str) -> list[dict[str, Any]]:
    result = cli_runner().invoke(app, ["plan", *args])
    assert result.exit_code == 0, result.output
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def trainjob(name: str, runtime: dict[str, str], nodes: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {"runtimeRef": runtime, "trainer": {"numNodes": nodes, "command": ["python", "train.py"]}},
    }


def node_env(jobset: dict[str, Any]) -> dict[str, Any]:
    [job] = jobset["spec"]["replicatedJobs"]
    [container] = job["template"]["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def test_a_trainjob_plans_as_the_operator_applies_it_snapshot_first_then_the_jobset() -> None:
    snapshot, jobset = planned(str(EXAMPLE))
    assert (snapshot["kind"], snapshot["metadata"]["name"]) == ("ConfigMap", "torch-ddp-runtime-snapshot")
    assert "name: torch-distributed" in snapshot["data"]["runtime"]
    assert (jobset["apiVersion"], jobset["kind"], jobset["metadata"]["name"]) == (
        "jobset.x-k8s.io/v1alpha2",
        "JobSet",
        "torch-ddp",
    )
    env = node_env(jobset)
    assert (env["PET_NNODES"], env["PET_MASTER_ADDR"], env["PET_MASTER_PORT"]) == (
        "2",
        "torch-ddp-node-0-0.torch-ddp",
        "29500",
    )


def test_an_mpi_runtimes_trainjob_plans_its_ssh_secret_and_hostfile_before_the_jobset(tmp_path: Path) -> None:
    path = tmp_path / "mpi.yaml"
    path.write_text(yaml.safe_dump(trainjob("ds", {"name": "deepspeed-distributed"})))
    kinds = [(d["kind"], d["metadata"]["name"]) for d in planned(str(path))]
    assert kinds == [
        ("ConfigMap", "ds-runtime-snapshot"),
        ("Secret", "ds-mpi-ssh-auth"),
        ("ConfigMap", "ds-mpi-hostfile"),
        ("JobSet", "ds"),
    ]


def test_a_trainjob_plans_locally_as_one_process_per_node_reaching_node_0_on_loopback() -> None:
    nodes = planned(str(EXAMPLE), "--target", "local")
    assert [(n["replica"], n["name"]) for n in nodes] == [
        ("node-0", "torch-ddp-node-0-0"),
        ("node-1", "torch-ddp-node-0-1"),
    ]
    assert [n["env"]["PET_NODE_RANK"] for n in nodes] == ["0", "1"]
    assert {n["env"]["PET_MASTER_ADDR"] for n in nodes} == {"127.0.0.1"}
    assert len({n["env"]["PET_MASTER_PORT"] for n in nodes}) == 1
    assert nodes[0]["command"][:2] == ["torchrun", "examples/pytorch-ddp/train_ddp.py"]


def test_a_trainjob_is_planned_on_a_runtime_named_in_a_runtime_file(tmp_path: Path) -> None:
    job, runtime = tmp_path / "job.yaml", tmp_path / "runtime.yaml"
    job.write_text(yaml.safe_dump(trainjob("mine", {"name": "mine", "kind": "TrainingRuntime"})))
    runtime.write_text(yaml.safe_dump(RUNTIME))
    _, jobset = planned(str(job), "--runtime-file", str(runtime))
    [replicated] = jobset["spec"]["replicatedJobs"]
    assert replicated["template"]["spec"]["template"]["spec"]["containers"][0]["image"] == "mine:1"


def test_a_trainjob_on_a_runtime_found_nowhere_exits_2_naming_the_field(tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(yaml.safe_dump(trainjob("lost", {"name": "mine", "kind": "TrainingRuntime"})))
    result = cli_runner().invoke(app, ["plan", str(job)])
    assert result.exit_code == 2
    assert "spec.runtimeRef.name: TrainingRuntime 'mine' is neither in the manifest" in result.stderr


def test_a_file_of_a_v1_job_and_a_trainjob_plans_both(tmp_path: Path) -> None:
    v1 = yaml.safe_load((ROOT / "examples" / "pytorch-ddp" / "job.yaml").read_text())
    path = tmp_path / "both.yaml"
    path.write_text(yaml.safe_dump_all([v1, trainjob("tj", {"name": "torch-distributed"}), RUNTIME]))
    kinds = [d["kind"] for d in planned(str(path))]
    assert "Pod" in kinds and kinds[-2:] == ["ConfigMap", "JobSet"]
