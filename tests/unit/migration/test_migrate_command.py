"""``kubetrain migrate``: the manifests on stdout (or in files), what changes on stderr and atop the YAML."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from builders import cli_runner, manifest
from docs_blocks import ROOT
from kubetrain.cli.main import app

DDP = ROOT / "examples" / "pytorch-ddp" / "job.yaml"
XGBOOST = ROOT / "examples" / "xgboost" / "job.yaml"
TENSORFLOW = ROOT / "examples" / "tensorflow" / "job.yaml"


def test_the_yaml_opens_with_what_the_job_became_and_what_changed() -> None:
    result = cli_runner().invoke(app, ["migrate", str(DDP)])
    assert result.exit_code == 0, result.output
    comment = [line for line in result.stdout.splitlines() if line.startswith("#")]
    assert comment[0].startswith(
        "# PyTorchJob pytorch-ddp (kubeflow.org/v1) becomes TrainJob pytorch-ddp on the"
    )
    assert any("runs under torchrun" in line for line in comment)
    assert all(len(line) <= 110 for line in comment)


def test_stderr_says_the_same_for_whoever_reads_the_terminal() -> None:
    result = cli_runner().invoke(app, ["migrate", str(DDP)])
    assert result.stderr.startswith("PyTorchJob pytorch-ddp (kubeflow.org/v1) becomes TrainJob pytorch-ddp")
    assert (
        "- spec.pytorchReplicaSpecs.Master.template.spec.containers[0].command: runs under torchrun"
        in result.stderr
    )


def test_the_runtime_comes_before_the_trainjob_that_names_it() -> None:
    result = cli_runner().invoke(app, ["migrate", str(XGBOOST)])
    kinds = [d["kind"] for d in yaml.safe_load_all(result.stdout)]
    assert kinds == ["TrainingRuntime", "TrainJob"]


def test_json_output_is_one_list_of_every_manifest() -> None:
    result = cli_runner().invoke(app, ["migrate", str(XGBOOST), str(DDP), "-o", "json"])
    listed = json.loads(result.stdout)
    assert listed["kind"] == "List"
    assert [i["kind"] for i in listed["items"]] == ["TrainingRuntime", "TrainJob", "TrainJob"]


def test_output_dir_writes_one_file_per_job_and_prints_its_path(tmp_path: Path) -> None:
    result = cli_runner().invoke(
        app, ["migrate", str(DDP), str(XGBOOST), "--output-dir", str(tmp_path / "v2")]
    )
    written = [tmp_path / "v2" / "pytorch-ddp.yaml", tmp_path / "v2" / "xgboost-collective.yaml"]
    assert result.stdout.splitlines() == [str(p) for p in written]
    assert [d["kind"] for d in yaml.safe_load_all(written[1].read_text())] == ["TrainingRuntime", "TrainJob"]


def test_a_refused_job_exits_1_naming_why_and_the_others_are_still_written() -> None:
    result = cli_runner().invoke(app, ["migrate", str(TENSORFLOW), str(DDP)])
    assert result.exit_code == 1
    assert "TFJob tf-multiworker cannot become a TrainJob:\n  - spec.tfReplicaSpecs: " in result.stderr
    assert [d["kind"] for d in yaml.safe_load_all(result.stdout)] == ["TrainJob"]


def test_an_invalid_manifest_exits_2_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(manifest("PyTorchJob", {"Master": 1}, spec={"nprocPerNod": "2"})))
    result = cli_runner().invoke(app, ["migrate", str(path)])
    assert result.exit_code == 2
    assert "nprocPerNod" in result.stderr


def test_exit_codes_are_listed_on_one_line(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(manifest("PyTorchJob", {"Master": 1}, restart_policy="ExitCode")))
    result = cli_runner().invoke(app, ["migrate", str(path)])
    assert "values: [1, 2, 3," in result.stdout


def test_a_job_read_back_from_a_cluster_migrates_from_stdin_as_written() -> None:
    read_back = yaml.safe_load(DDP.read_text())
    read_back["metadata"] |= {"uid": "u-1", "resourceVersion": "7", "managedFields": [{"manager": "kubectl"}]}
    for spec in read_back["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["metadata"] = {"creationTimestamp": None}
    read_back["status"] = {"conditions": [{"type": "Succeeded", "status": "True"}]}
    result = cli_runner().invoke(app, ["migrate", "-"], input=yaml.safe_dump(read_back))
    assert result.exit_code == 0, result.output
    (trainjob,) = yaml.safe_load_all(result.stdout)
    assert trainjob["metadata"] == {"name": "pytorch-ddp"}
    assert trainjob["spec"]["runtimeRef"] == {"name": "torch-distributed"}
