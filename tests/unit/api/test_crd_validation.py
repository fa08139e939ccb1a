"""What the generated CRDs admit: valid manifests of every kind pass, each broken rule is refused.

An object is checked as the API server would: against the OpenAPI schema (``jsonschema``), then
against every CEL rule (``crd_checks.cel_violations``); updates also run the transition rules.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest

from crd_checks import cel_violations
from kubetrain.frameworks.crds import MpiApi, all_crds

CRDS = {
    (crd["spec"]["versions"][0]["name"], crd["spec"]["names"]["kind"]): crd
    for crd in [*all_crds(MpiApi.V2BETA1), *all_crds(MpiApi.V1)]
}

Manifest = dict[str, Any]


def _template(container: str) -> dict[str, Any]:
    return {
        "spec": {"containers": [{"name": container, "image": "example.com/train:1", "args": ["--epochs=1"]}]}
    }


def _job(api_version: str, kind: str, replica_map: str, specs: dict[str, Any], **spec: Any) -> Manifest:
    return {
        "apiVersion": f"kubeflow.org/{api_version}",
        "kind": kind,
        "metadata": {"name": "mnist", "namespace": "default"},
        "spec": {replica_map: specs, **spec},
    }


VALID: dict[str, Manifest] = {
    "PyTorchJob": _job(
        "v1",
        "PyTorchJob",
        "pytorchReplicaSpecs",
        {
            "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": _template("pytorch")},
            "Worker": {"replicas": 2, "restartPolicy": "ExitCode", "template": _template("pytorch")},
        },
        nprocPerNode="2",
        runPolicy={
            "cleanPodPolicy": "Running",
            "backoffLimit": 3,
            "ttlSecondsAfterFinished": 60,
            "activeDeadlineSeconds": 3600,
            "schedulingPolicy": {"queue": "team-a", "minResources": {"cpu": "4", "nvidia.com/gpu": 2}},
            "managedBy": "kubeflow.org/training-operator",
        },
    ),
    "ElasticPyTorchJob": _job(
        "v1",
        "PyTorchJob",
        "pytorchReplicaSpecs",
        {"Worker": {"replicas": 2, "template": _template("pytorch")}},
        elasticPolicy={
            "minReplicas": 1,
            "maxReplicas": 4,
            "rdzvBackend": "c10d",
            "rdzvConf": [{"key": "timeout", "value": "900"}],
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}}],
        },
    ),
    "TFJob": _job(
        "v1",
        "TFJob",
        "tfReplicaSpecs",
        {
            "Chief": {"replicas": 1, "template": _template("tensorflow")},
            "PS": {"replicas": 1, "template": _template("tensorflow")},
            "Worker": {"replicas": 2, "template": _template("tensorflow")},
            "Evaluator": {"replicas": 1, "template": _template("tensorflow")},
        },
        successPolicy="AllWorkers",
        enableDynamicWorker=True,
    ),
    "XGBoostJob": _job(
        "v1",
        "XGBoostJob",
        "xgbReplicaSpecs",
        {
            "Master": {"replicas": 1, "template": _template("xgboost")},
            "Worker": {"replicas": 3, "template": _template("xgboost")},
        },
    ),
    "PaddleJob": _job(
        "v1",
        "PaddleJob",
        "paddleReplicaSpecs",
        {"Worker": {"replicas": 2, "template": _template("paddle")}},
        elasticPolicy={"minReplicas": 2, "maxReplicas": 2},
    ),
    "JAXJob": _job(
        "v1", "JAXJob", "jaxReplicaSpecs", {"Worker": {"replicas": 2, "template": _template("jax")}}
    ),
    "MXJob": _job(
        "v1",
        "MXJob",
        "mxReplicaSpecs",
        {
            "Scheduler": {"replicas": 1, "template": _template("mxnet")},
            "Server": {"replicas": 1, "template": _template("mxnet")},
            "Worker": {"replicas": 1, "template": _template("mxnet")},
        },
        jobMode="MXTrain",
    ),
    "MPIJob/v1": _job(
        "v1",
        "MPIJob",
        "mpiReplicaSpecs",
        {
            "Launcher": {"replicas": 1, "template": _template("mpi")},
            "Worker": {"replicas": 2, "template": _template("mpi")},
        },
        slotsPerWorker=1,
        mainContainer="mpi",
        cleanPodPolicy="Running",
    ),
    "MPIJob/v2beta1": _job(
        "v2beta1",
        "MPIJob",
        "mpiReplicaSpecs",
        {
            "Launcher": {"replicas": 1, "restartPolicy": "OnFailure", "template": _template("mpi")},
            "Worker": {"replicas": 2, "restartPolicy": "Never", "template": _template("mpi")},
        },
        slotsPerWorker=2,
        launcherCreationPolicy="WaitForWorkersReady",
        mpiImplementation="MPICH",
        runPolicy={"suspend": True, "backoffLimit": 2},
    ),
}


def _crd_schema(job: Manifest) -> dict[str, Any]:
    version = job["apiVersion"].rsplit("/", 1)[-1]
    schema: dict[str, Any] = CRDS[(version, job["kind"])]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def admission_errors(job: Manifest, old: Manifest | None = None) -> list[str]:
    schema = _crd_schema(job)
    errors = [
        f"{'.'.join(str(p) for p in error.absolute_path)}: {error.message}"
        for error in jsonschema.Draft7Validator(schema).iter_errors(job)
    ]
    return errors + cel_violations(schema, job, old)


def _broken(name: str, path: str, value: Any) -> Manifest:
    """A copy of ``VALID[name]`` with the dotted ``path`` set to ``value`` (``None`` deletes it)."""
    job = copy.deepcopy(VALID[name])
    *parents, last = path.split(".")
    node = job
    for step in parents:
        node = node.setdefault(step, {})
    if value is None:
        del node[last]
    else:
        node[last] = value
    return job


@pytest.mark.parametrize("name", sorted(VALID))
def test_a_valid_manifest_of_every_kind_is_admitted(name: str) -> None:
    assert admission_errors(VALID[name]) == []


# --- schema: enums and minimums ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("spec.pytorchReplicaSpecs.Worker.restartPolicy", "Sometimes", "'Sometimes' is not one of"),
        ("spec.runPolicy.cleanPodPolicy", "Finished", "'Finished' is not one of"),
        ("spec.elasticPolicy.rdzvBackend", "zookeeper", "'zookeeper' is not one of"),
        ("spec.runPolicy.managedBy", "example.com/other", "'example.com/other' is not one of"),
        ("spec.nprocPerNode", "four", "'four' does not match '^(auto|cpu|gpu|[+-]?[0-9]+)$'"),
        ("spec.pytorchReplicaSpecs.Worker.replicas", -1, "-1 is less than the minimum of 0"),
        ("spec.runPolicy.backoffLimit", -1, "-1 is less than the minimum of 0"),
        ("spec.runPolicy.activeDeadlineSeconds", -5, "-5 is less than the minimum of 0"),
        ("spec.runPolicy.ttlSecondsAfterFinished", -1, "-1 is less than the minimum of 0"),
    ],
)
def test_out_of_range_values_are_refused_by_the_schema(path: str, value: Any, expected: str) -> None:
    name = "ElasticPyTorchJob" if "elasticPolicy" in path else "PyTorchJob"
    errors = admission_errors(_broken(name, path, value))
    assert any(expected in error for error in errors), errors


def test_tf_success_policy_accepts_only_its_values() -> None:
    errors = admission_errors(_broken("TFJob", "spec.successPolicy", "AnyWorker"))
    assert any("'AnyWorker' is not one of ['', 'AllWorkers']" in error for error in errors)


def test_v2beta1_managed_by_names_the_mpi_operator() -> None:
    assert (
        admission_errors(_broken("MPIJob/v2beta1", "spec.runPolicy.managedBy", "kubeflow.org/mpi-operator"))
        == []
    )
    errors = admission_errors(
        _broken("MPIJob/v2beta1", "spec.runPolicy.managedBy", "kubeflow.org/training-operator")
    )
    assert errors == [
        "spec.runPolicy.managedBy: 'kubeflow.org/training-operator' is not one of "
        "['kubeflow.org/mpi-operator', 'kueue.x-k8s.io/multikueue']"
    ]


def test_the_replica_map_is_required() -> None:
    errors = admission_errors(_broken("JAXJob", "spec.jaxReplicaSpecs", None))
    assert "spec: 'jaxReplicaSpecs' is a required property" in errors


def test_pod_templates_are_not_checked_by_the_schema() -> None:
    job = _broken("JAXJob", "spec.jaxReplicaSpecs.Worker.template", {"spec": {"anything": [1, "two"]}})
    assert admission_errors(job) == []


# --- CEL: rules every kind shares -------------------------------------------------------------------


def test_replica_types_outside_the_kind_are_refused_with_the_allowed_ones() -> None:
    job = _broken("PyTorchJob", "spec.pytorchReplicaSpecs.worker", {"replicas": 1})
    assert "spec.pytorchReplicaSpecs keys must be replica types Master, Worker (exact case)" in (
        admission_errors(job)
    )


def test_tf_replica_types_are_whitelisted_too() -> None:
    job = _broken("TFJob", "spec.tfReplicaSpecs.Trainer", {"replicas": 1})
    assert (
        "spec.tfReplicaSpecs keys must be replica types Chief, Master, PS, Worker, Evaluator (exact case)"
        in (admission_errors(job))
    )


def test_a_job_name_that_is_not_a_dns_1035_label_is_refused() -> None:
    errors = admission_errors(_broken("JAXJob", "metadata.name", "1-mnist"))
    assert any(error.startswith("metadata.name must be a DNS-1035 label") for error in errors)


def test_a_job_name_whose_replica_names_exceed_63_characters_is_refused() -> None:
    # "<name>-worker-9" is 63 characters with a 54-character name and ten workers (index 9).
    job = _broken("JAXJob", "spec.jaxReplicaSpecs.Worker.replicas", 10)
    job["metadata"]["name"] = "a" * 54
    assert admission_errors(job) == []
    job["metadata"]["name"] = "a" * 55
    assert any(error.startswith("metadata.name is too long") for error in admission_errors(job))


def test_the_derived_name_length_counts_the_digits_of_the_last_index() -> None:
    job = _broken("JAXJob", "spec.jaxReplicaSpecs.Worker.replicas", 11)
    job["metadata"]["name"] = "a" * 54
    assert any(error.startswith("metadata.name is too long") for error in admission_errors(job))


def test_a_replica_type_scaled_to_zero_names_no_replica() -> None:
    # "<58 characters>-ps-0" is 63 characters; "<58 characters>-evaluator-0" would be 70.
    job = _broken(
        "TFJob",
        "spec.tfReplicaSpecs",
        {
            "PS": {"replicas": 1, "template": _template("tensorflow")},
            "Evaluator": {"replicas": 0, "template": _template("tensorflow")},
        },
    )
    job["metadata"]["name"] = "a" * 58
    assert admission_errors(job) == []
    job["spec"]["tfReplicaSpecs"]["Evaluator"]["replicas"] = 1
    assert any(error.startswith("metadata.name is too long") for error in admission_errors(job))


def test_queue_is_immutable() -> None:
    old = VALID["PyTorchJob"]
    new = _broken("PyTorchJob", "spec.runPolicy.schedulingPolicy.queue", "team-b")
    assert admission_errors(new, old) == ["spec.runPolicy.schedulingPolicy.queue is immutable"]


def test_queue_may_be_set_at_creation() -> None:
    assert admission_errors(_broken("PyTorchJob", "spec.runPolicy.schedulingPolicy.queue", "team-b")) == []


def test_managed_by_cannot_change() -> None:
    old = VALID["PyTorchJob"]
    new = _broken("PyTorchJob", "spec.runPolicy.managedBy", "kueue.x-k8s.io/multikueue")
    assert admission_errors(new, old) == [
        "spec.runPolicy.managedBy is immutable; delete and recreate the job to change it"
    ]


def test_managed_by_cannot_be_added_after_creation() -> None:
    old = VALID["JAXJob"]
    new = _broken("JAXJob", "spec.runPolicy", {"managedBy": "kueue.x-k8s.io/multikueue"})
    assert admission_errors(new, old) == [
        "spec.runPolicy.managedBy is immutable; delete and recreate the job to change it"
    ]


def test_other_updates_pass_the_transition_rules() -> None:
    old = VALID["PyTorchJob"]
    new = _broken("PyTorchJob", "spec.runPolicy.suspend", True)
    assert admission_errors(new, old) == []


# --- CEL: kind-specific rules -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "path", "value", "message"),
    [
        (
            "PyTorchJob",
            "spec.pytorchReplicaSpecs.Master.replicas",
            2,
            "spec.pytorchReplicaSpecs.Master.replicas must be 1; scale the Workers instead",
        ),
        (
            "PyTorchJob",
            "spec.pytorchReplicaSpecs.Worker.replicas",
            0,
            "spec.pytorchReplicaSpecs.Worker.replicas must be at least 1; "
            "remove the Worker spec for a Master-only job",
        ),
        (
            "ElasticPyTorchJob",
            "spec.elasticPolicy.minReplicas",
            5,
            "spec.elasticPolicy.minReplicas must be at most spec.elasticPolicy.maxReplicas",
        ),
        (
            "PaddleJob",
            "spec.elasticPolicy.maxReplicas",
            1,
            "spec.elasticPolicy.minReplicas must be at most spec.elasticPolicy.maxReplicas",
        ),
        (
            "XGBoostJob",
            "spec.xgbReplicaSpecs.Master",
            None,
            "spec.xgbReplicaSpecs.Master is required: the Master runs the XGBoost tracker",
        ),
        (
            "XGBoostJob",
            "spec.xgbReplicaSpecs.Master.replicas",
            3,
            "spec.xgbReplicaSpecs.Master.replicas must be 1; scale the Workers instead",
        ),
        (
            "MXJob",
            "spec.mxReplicaSpecs.Scheduler.replicas",
            2,
            "spec.mxReplicaSpecs.Scheduler.replicas must be at most 1; an MXJob has one Scheduler",
        ),
        (
            "MPIJob/v1",
            "spec.mpiReplicaSpecs.Launcher",
            None,
            "spec.mpiReplicaSpecs.Launcher is required: the Launcher runs mpirun",
        ),
        (
            "MPIJob/v1",
            "spec.mpiReplicaSpecs.Launcher.replicas",
            2,
            "spec.mpiReplicaSpecs.Launcher.replicas must be 1; scale the Workers instead",
        ),
        (
            "MPIJob/v2beta1",
            "spec.mpiReplicaSpecs.Launcher",
            None,
            "spec.mpiReplicaSpecs.Launcher is required: the Launcher runs mpirun",
        ),
        (
            "MPIJob/v2beta1",
            "spec.mpiReplicaSpecs.Worker.replicas",
            0,
            "spec.mpiReplicaSpecs.Worker.replicas must be at least 1; remove the Worker spec instead",
        ),
        (
            "MPIJob/v2beta1",
            "spec.mpiReplicaSpecs.Worker.restartPolicy",
            "ExitCode",
            "spec.mpiReplicaSpecs.<type>.restartPolicy must be one of Never, OnFailure "
            "in a kubeflow.org/v2beta1 MPIJob",
        ),
    ],
)
def test_kind_rules_refuse_with_a_message_naming_the_field_and_the_fix(
    name: str, path: str, value: Any, message: str
) -> None:
    assert admission_errors(_broken(name, path, value)) == [message]


def test_an_unset_master_replica_count_is_admitted_because_it_defaults_to_one() -> None:
    assert admission_errors(_broken("PyTorchJob", "spec.pytorchReplicaSpecs.Master.replicas", None)) == []


def test_elastic_pytorch_needs_workers() -> None:
    job = _broken(
        "ElasticPyTorchJob", "spec.pytorchReplicaSpecs", {"Master": {"template": _template("pytorch")}}
    )
    assert admission_errors(job) == [
        "spec.pytorchReplicaSpecs.Worker is required when spec.elasticPolicy is set"
    ]


def test_nproc_per_node_is_set_in_one_place_only() -> None:
    job = _broken("ElasticPyTorchJob", "spec.elasticPolicy.nProcPerNode", 2)
    job["spec"]["nprocPerNode"] = "2"
    assert admission_errors(job) == [
        "spec.nprocPerNode and spec.elasticPolicy.nProcPerNode are mutually exclusive; "
        "set only spec.nprocPerNode (elasticPolicy.nProcPerNode is deprecated)"
    ]


def test_tf_chief_and_master_are_mutually_exclusive() -> None:
    job = _broken("TFJob", "spec.tfReplicaSpecs.Master", {"replicas": 1, "template": _template("tensorflow")})
    assert admission_errors(job) == [
        "spec.tfReplicaSpecs must not have both Chief and Master: they are the same role; keep one"
    ]
