"""Planning a TrainJob: the JobSet and companions Trainer v2.3.0 makes, from each built-in runtime."""

from __future__ import annotations

import pytest
from trainjobs import builtin, container_of, env_of, pod_spec, replicated_job, runtime, trainjob

from kubetrain.api.errors import InvalidJobError
from kubetrain.engine.trainjob_plan import plan
from kubetrain.frameworks.trainer.builtin import builtin_runtimes
from kubetrain.frameworks.trainer.plugin import Existing

INDEX = {"fieldRef": {"fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}


def _jobset(job: object, rt: object) -> dict:  # type: ignore[type-arg]
    planned = plan(job, rt.spec)  # type: ignore[attr-defined,arg-type]
    assert planned.jobset is not None
    return planned.jobset


def test_every_builtin_runtime_plans_a_jobset_named_and_owned_like_the_trainjob() -> None:
    for name, rt in builtin_runtimes().items():
        jobset = _jobset(trainjob(name, trainer={"numNodes": 1}), rt)
        assert jobset["metadata"]["name"] == "demo" and jobset["metadata"]["namespace"] == "team"
        (owner,) = jobset["metadata"]["ownerReferences"]
        assert owner == {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": "demo",
            "uid": "uid-demo",
            "controller": True,
            "blockOwnerDeletion": True,
        }, name


def test_torch_nodes_get_torchrun_env_after_their_own_and_the_master_on_node_0_0() -> None:
    job = trainjob(trainer={"numNodes": 3, "env": [{"name": "LR", "value": "0.1"}]})
    node = container_of(_jobset(job, builtin("torch-distributed")), "node")
    assert [e["name"] for e in node["env"]] == [
        "LR",
        "PET_NNODES",
        "PET_NPROC_PER_NODE",
        "PET_NODE_RANK",
        "PET_MASTER_ADDR",
        "PET_MASTER_PORT",
    ]
    assert env_of(node) == {
        "LR": "0.1",
        "PET_NNODES": "3",
        "PET_NPROC_PER_NODE": "1",  # auto without GPUs: the CPU request, at least 1
        "PET_NODE_RANK": INDEX,
        "PET_MASTER_ADDR": "demo-node-0-0.demo",
        "PET_MASTER_PORT": "29500",
    }
    assert node["ports"] == [{"containerPort": 29500}]


def test_torch_processes_per_node_are_the_cpu_request_without_gpus() -> None:
    job = trainjob(trainer={"resourcesPerNode": {"requests": {"cpu": "1500m"}}})
    assert (
        env_of(container_of(_jobset(job, builtin("torch-distributed")), "node"))["PET_NPROC_PER_NODE"] == "2"
    )


def test_torch_processes_per_node_stay_auto_with_gpus() -> None:
    job = trainjob(trainer={"resourcesPerNode": {"limits": {"nvidia.com/gpu": 4}}})
    assert (
        env_of(container_of(_jobset(job, builtin("torch-distributed")), "node"))["PET_NPROC_PER_NODE"]
        == "auto"
    )


def test_trainer_overrides_image_command_and_args_of_the_node_container() -> None:
    job = trainjob(trainer={"image": "img:1", "command": ["torchrun"], "args": ["train.py"]})
    node = container_of(_jobset(job, builtin("torch-distributed")), "node")
    assert (node["image"], node["command"], node["args"]) == ("img:1", ["torchrun"], ["train.py"])


def test_trainer_job_runs_num_nodes_pods_in_one_job() -> None:
    jobset = _jobset(trainjob(trainer={"numNodes": 4}), builtin("torch-distributed"))
    (job,) = jobset["spec"]["replicatedJobs"]
    assert job["replicas"] == 1
    assert (job["template"]["spec"]["parallelism"], job["template"]["spec"]["completions"]) == (4, 4)


def test_resources_per_node_merge_over_the_runtime_node_resources() -> None:
    rt = runtime(
        [
            replicated_job(
                "node",
                [{"name": "node", "image": "x", "resources": {"limits": {"cpu": "2", "memory": "1Gi"}}}],
                ancestor="trainer",
            )
        ],
        mlPolicy={"torch": {}},
    )
    job = trainjob("custom", trainer={"resourcesPerNode": {"limits": {"cpu": "4"}}})
    node = container_of(_jobset(job, rt), "node")
    assert node["resources"] == {"limits": {"cpu": "4", "memory": "1Gi"}}


def test_mpi_runtime_with_launcher_as_node_runs_one_node_fewer_and_lists_all_in_the_hostfile() -> None:
    planned = plan(
        trainjob("deepspeed-distributed", trainer={"numNodes": 3}), builtin("deepspeed-distributed").spec
    )
    secret, hostfile, jobset = planned.objects
    assert (secret["kind"], secret["metadata"]["name"], secret["type"]) == (
        "Secret",
        "demo-mpi-ssh-auth",
        "kubernetes.io/ssh-auth",
    )
    assert hostfile["metadata"]["name"] == "demo-mpi-hostfile"
    assert hostfile["data"]["hostfile"] == (
        "demo-node-0-0.demo slots=1\ndemo-node-0-1.demo slots=1\ndemo-launcher-0-0.demo slots=1\n"
    )
    assert (
        pod_spec(jobset, "node")
        and jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 2
    )


def test_mpi_launcher_gets_open_mpi_env_and_the_hostfile_mounted() -> None:
    jobset = plan(trainjob("deepspeed-distributed"), builtin("deepspeed-distributed").spec).jobset
    assert jobset is not None
    launcher = container_of(jobset, "launcher")
    assert env_of(launcher) == {
        "OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile",
        "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
        "OMPI_MCA_orte_set_default_slots": "1",
        "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10",
    }
    assert {m["mountPath"] for m in launcher["volumeMounts"]} == {"/home/mpiuser/.ssh", "/etc/mpi"}
    assert "env" not in container_of(jobset, "node")


def test_an_existing_ssh_secret_is_not_planned_again() -> None:
    planned = plan(
        trainjob("deepspeed-distributed"),
        builtin("deepspeed-distributed").spec,
        existing=Existing(ssh_secret=True),
    )
    assert [o["kind"] for o in planned.objects] == ["ConfigMap", "JobSet"]


def test_a_running_jobset_is_not_applied_again() -> None:
    planned = plan(trainjob(), builtin("torch-distributed").spec, existing=Existing(jobset_suspended=False))
    assert planned.jobset is None


def test_a_suspended_trainjob_plans_a_suspended_jobset() -> None:
    jobset = _jobset(trainjob(suspend=True), builtin("torch-distributed"))
    assert jobset["spec"]["suspend"] is True


def test_jax_nodes_get_the_coordinator_on_node_0_0() -> None:
    node = container_of(
        _jobset(trainjob("jax-distributed", trainer={"numNodes": 2}), builtin("jax-distributed"))
    )
    assert env_of(node) == {
        "JAX_NUM_PROCESSES": "2",
        "JAX_PROCESS_ID": INDEX,
        "JAX_COORDINATOR_ADDRESS": "demo-node-0-0.demo:29500",
    }


def test_xgboost_workers_are_nodes_times_gpus() -> None:
    job = trainjob(
        "xgboost-distributed", trainer={"numNodes": 2, "resourcesPerNode": {"limits": {"nvidia.com/gpu": 2}}}
    )
    node = container_of(_jobset(job, builtin("xgboost-distributed")))
    assert env_of(node) == {
        "DMLC_TRACKER_URI": "demo-node-0-0.demo",
        "DMLC_TRACKER_PORT": "29500",
        "DMLC_TASK_ID": INDEX,
        "DMLC_NUM_WORKER": "4",
    }


def test_plain_runtime_gets_only_the_trainer_env_and_node_count() -> None:
    rt = runtime([replicated_job("node", [{"name": "node", "image": "tf"}], ancestor="trainer")])
    job = trainjob("custom", trainer={"numNodes": 2, "env": [{"name": "TF_CONFIG", "value": "{}"}]})
    jobset = _jobset(job, rt)
    assert env_of(container_of(jobset, "node")) == {"TF_CONFIG": "{}"}
    assert jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["parallelism"] == 2


def test_initializers_get_the_storage_uri_env_and_secret() -> None:
    job = trainjob(
        "torchtune-llama3.2-1b",
        initializer={"dataset": {"storageUri": "hf://me/data", "secretRef": {"name": "hf-token"}}},
    )
    jobset = _jobset(job, builtin("torchtune-llama3.2-1b"))
    dataset = container_of(jobset, "dataset-initializer", "dataset-initializer")
    assert env_of(dataset)["STORAGE_URI"] == "hf://me/data"
    assert dataset["envFrom"] == [{"secretRef": {"name": "hf-token"}}]
    model = container_of(jobset, "model-initializer", "model-initializer")
    assert env_of(model)["STORAGE_URI"] == "hf://meta-llama/Llama-3.2-1B-Instruct"


def test_torchtune_command_gets_its_recipe_and_config_from_the_model_and_devices() -> None:
    job = trainjob("torchtune-llama3.2-1b", trainer={"command": ["tune", "run"]})
    node = container_of(_jobset(job, builtin("torchtune-llama3.2-1b")))
    assert node["command"] == [
        "tune",
        "run",
        "--rdzv_endpoint=demo-node-0-0.demo:29500",
        "full_finetune_distributed",
        "--config",
        "llama3_2/1B_full",
        "output_dir=/workspace/output",
        "tokenizer.path=/workspace/model/original/tokenizer.model",
        "checkpointer.checkpoint_dir=/workspace/model",
    ]
    assert "PET_MASTER_ADDR" not in env_of(node)


def test_coscheduling_labels_every_pod_and_sums_the_gang() -> None:
    rt = runtime(
        [
            replicated_job(
                "node",
                [{"name": "node", "image": "x", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}],
                ancestor="trainer",
            )
        ],
        mlPolicy={"numNodes": 4, "torch": {}},
        podGroupPolicy={"coscheduling": {"scheduleTimeoutSeconds": 120}},
    )
    planned = plan(trainjob("custom"), rt.spec)
    pod_group, jobset = planned.objects
    assert (
        pod_group["apiVersion"] == "scheduling.x-k8s.io/v1alpha1" and pod_group["metadata"]["name"] == "demo"
    )
    assert pod_group["spec"] == {
        "minMember": 4,
        "minResources": {"cpu": "2", "memory": "4Gi"},
        "scheduleTimeoutSeconds": 120,
    }
    labels = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["labels"]
    assert labels == {"scheduling.x-k8s.io/pod-group": "demo"}


def test_volcano_annotates_every_pod_with_its_group() -> None:
    rt = runtime(
        [replicated_job("node", [{"name": "node", "image": "x"}], ancestor="trainer")],
        mlPolicy={"torch": {}},
        podGroupPolicy={"volcano": {}},
    )
    pod_group, jobset = plan(trainjob("custom"), rt.spec).objects
    assert pod_group["apiVersion"] == "scheduling.volcano.sh/v1beta1" and pod_group["spec"]["minMember"] == 1
    template = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert template["metadata"]["annotations"] == {"scheduling.k8s.io/group-name": "demo"}


def test_runtime_patches_merge_into_the_named_job_and_keep_the_runtime_order() -> None:
    patch = {
        "manager": "kueue.x-k8s.io/manager",
        "trainingRuntimeSpec": {
            "template": {
                "metadata": {"labels": {"team": "a"}},
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "template": {
                                        "spec": {
                                            "nodeSelector": {"pool": "gpu"},
                                            "containers": [
                                                {
                                                    "name": "node",
                                                    "volumeMounts": [{"name": "d", "mountPath": "/d"}],
                                                }
                                            ],
                                        }
                                    }
                                }
                            },
                        }
                    ]
                },
            }
        },
    }
    jobset = _jobset(
        trainjob("deepspeed-distributed", runtimePatches=[patch]), builtin("deepspeed-distributed")
    )
    assert [j["name"] for j in jobset["spec"]["replicatedJobs"]] == ["node", "launcher"]
    assert pod_spec(jobset, "node")["nodeSelector"] == {"pool": "gpu"}
    assert {"name": "d", "mountPath": "/d"} in container_of(jobset, "node")["volumeMounts"]
    assert jobset["metadata"]["labels"] == {"team": "a"}


def test_reserved_torch_env_is_refused_naming_the_field() -> None:
    job = trainjob(trainer={"env": [{"name": "PET_NNODES", "value": "9"}]})
    with pytest.raises(InvalidJobError, match=r"spec\.trainer\.env: must not have reserved envs.*PET_NNODES"):
        plan(job, builtin("torch-distributed").spec)


def test_an_initializer_needs_its_job_in_the_runtime() -> None:
    job = trainjob(initializer={"dataset": {"storageUri": "hf://x/y"}})
    with pytest.raises(InvalidJobError, match="must have dataset-initializer job"):
        plan(job, builtin("torch-distributed").spec)


def test_a_patch_may_not_set_env_on_the_node_container() -> None:
    patch = {
        "manager": "example.com/me",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {
                                    "template": {
                                        "spec": {"containers": [{"name": "node", "env": [{"name": "A"}]}]}
                                    }
                                }
                            },
                        }
                    ]
                }
            }
        },
    }
    with pytest.raises(InvalidJobError, match="must not have envs for the dataset-initializer"):
        plan(trainjob(runtimePatches=[patch]), builtin("torch-distributed").spec)


def test_a_patch_manager_must_be_a_domain_prefixed_path() -> None:
    with pytest.raises(InvalidJobError, match="domain-prefixed path"):
        plan(trainjob(runtimePatches=[{"manager": "me"}]), builtin("torch-distributed").spec)


def test_the_jobsets_quantities_are_written_as_gos_resource_quantity_marshals_them() -> None:
    # As Trainer's apply carries them: the JobSet stored from it reads the same when applied again.
    job = trainjob(
        trainer={"numNodes": 1, "resourcesPerNode": {"requests": {"cpu": 0.5, "memory": "1024Mi"}}}
    )
    node = container_of(_jobset(job, builtin("torch-distributed")), "node")
    assert node["resources"] == {"requests": {"cpu": "500m", "memory": "1Gi"}}
    tune = container_of(
        _jobset(trainjob("torchtune-llama3.2-1b", trainer={"numNodes": 1}), builtin("torchtune-llama3.2-1b")),
        "node",
    )
    assert tune["resources"]["limits"] == {"nvidia.com/gpu": "2"}
