"""The Kubeflow SDK 0.5.0, unchanged, against kubetrain's operator on the real node: ``TrainerClient`` (its
Kubernetes backend) finds kubetrain's version ConfigMap, lists and reads the runtimes, trains a
``CustomTrainer`` function on 2 nodes (the function shipped as the SDK ships it: its source in a ``bash -c``
that writes it to a file and runs it under ``torchrun``) and a ``CustomTrainerContainer``, waits for them,
reads their steps from the pods, their logs (followed too) and events, lists and deletes them. The real
JobSet controller runs each TrainJob's JobSet.

The SDK's default runtime is Trainer's ``torch-distributed``, whose image (pytorch/pytorch) cannot be pulled
here: the function trains on ``torch-distributed-local``, a ClusterTrainingRuntime of the same shape on the
locally built PyTorch image, labelled ``trainer.kubeflow.org/framework: torch`` as the SDK requires. The
function installs no packages (``packages_to_install`` would pip install in the pod: no network there).

The function's job runs once for the module; each test checks one rule of what the SDK saw.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import yaml
from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import CustomTrainer, CustomTrainerContainer, TrainerClient
from kubeflow.trainer.constants import constants as sdk_constants
from kubeflow.trainer.types import types as sdk_types

from e2e.realpods import (
    TEST_IMAGE,
    TRAINJOBS,
    RealCluster,
    jobset_pods,
    scratch_namespace,
    trainjob,
    wait_until,
)
from kubetrain.envtest import realnode

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

PYTORCH_IMAGE = "localhost/kubetrain/pytorch:2.13.0"
LOCAL_RUNTIME = "torch-distributed-local"
OPERATOR_NAMESPACE = "kubeflow"  # the standalone overlay's, where its kubeflow-trainer-public ConfigMap is
BUILTIN_RUNTIMES = {
    "torch-distributed": "torch",
    "deepspeed-distributed": "deepspeed",
    "mlx-distributed": "mlx",
    "jax-distributed": "jax",
    "xgboost-distributed": "xgboost",
    "torchtune-llama3.2-1b": "torchtune",
    "torchtune-llama3.2-3b": "torchtune",
    "torchtune-qwen2.5-1.5b": "torchtune",
}
STEPS = 20
JOB_TIMEOUT_SECONDS = 420

TORCH_DISTRIBUTED_LOCAL = f"""
apiVersion: trainer.kubeflow.org/v1alpha1
kind: ClusterTrainingRuntime
metadata:
  name: {LOCAL_RUNTIME}
  labels:
    trainer.kubeflow.org/framework: torch
spec:
  mlPolicy:
    numNodes: 1
    torch: {{}}
  template:
    spec:
      replicatedJobs:
        - name: node
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: trainer
            spec:
              template:
                spec:
                  containers:
                    - name: node
                      image: {PYTORCH_IMAGE}
"""

# A namespaced runtime whose entrypoint is in its template: each node prints its rank from torchrun's PET_*
# variables with the standard library. The template's image (busybox) has no python: the nodes run only in
# the image a CustomTrainerContainer names.
NODES_SAY_HELLO = "nodes-say-hello"
HELLO = "import os; e = os.environ; print('node', e['PET_NODE_RANK'], 'of', e['PET_NNODES'], e['GREETING'])"
NODES_SAY_HELLO_RUNTIME = f"""
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainingRuntime
metadata:
  name: {NODES_SAY_HELLO}
  labels:
    trainer.kubeflow.org/framework: torch
spec:
  mlPolicy:
    numNodes: 1
    torch: {{}}
  template:
    spec:
      replicatedJobs:
        - name: node
          template:
            metadata:
              labels:
                trainer.kubeflow.org/trainjob-ancestor-step: trainer
            spec:
              template:
                spec:
                  containers:
                    - name: node
                      image: localhost/kubetrain/busybox:1.35
                      command: [python, -c, "{HELLO}"]
"""


def train_ddp(steps: int) -> None:
    """The function the SDK ships: DDP over gloo on every node, rank and loss printed at each step. Its source
    goes through bash unquoted (the SDK's heredoc), so it holds no dollar sign, backquote or backslash."""
    import time

    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(64, 4, generator=torch.Generator().manual_seed(rank))
    y = x.sum(dim=1, keepdim=True)
    for step in range(steps):
        optimizer.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        print(f"rank {rank}/{world} step {step} loss {loss.item():.4f}", flush=True)
        time.sleep(0.5)  # long enough a run that its log is followed while it trains
    dist.destroy_process_group()


@dataclass(frozen=True)
class SdkCluster:
    cluster: RealCluster
    namespace: str
    client: TrainerClient


@dataclass(frozen=True)
class TrainedFunction:
    sdk: SdkCluster
    name: str
    running: sdk_types.TrainJob
    followed: list[str]
    status_at_first_followed_line: str
    complete: sdk_types.TrainJob


def _create_once(cluster: RealCluster, collection: str, manifest: str) -> None:
    body = yaml.safe_load(manifest)
    if not cluster.api.exists(f"{collection}/{body['metadata']['name']}"):
        cluster.api.create(collection, body)


def _client(cluster: RealCluster, namespace: str) -> TrainerClient:
    config = KubernetesBackendConfig(namespace=namespace, config_file=str(cluster.kubeconfig))
    return TrainerClient(backend_config=config)


@pytest.fixture(scope="module")
def sdk(operator: RealCluster) -> Iterator[SdkCluster]:
    realnode.load_images(realnode.node_paths(operator.run_dir), ["pytorch"])
    # Cluster-scoped and the same for every run: created once, and left (a shared node's other runs use it).
    _create_once(
        operator, "/apis/trainer.kubeflow.org/v1alpha1/clustertrainingruntimes", TORCH_DISTRIBUTED_LOCAL
    )
    with pytest.MonkeyPatch.context() as env, scratch_namespace(operator, "kubeflow-sdk") as namespace:
        env.setenv("KUBEFLOW_SYSTEM_NAMESPACE", OPERATOR_NAMESPACE)
        yield SdkCluster(operator, namespace, _client(operator, namespace))


@pytest.fixture(scope="module")
def trained(sdk: SdkCluster) -> TrainedFunction:
    client = sdk.client
    runtime = client.get_runtime(LOCAL_RUNTIME)
    trainer = CustomTrainer(func=train_ddp, func_args={"steps": STEPS}, num_nodes=2)
    name = client.train(runtime=runtime, trainer=trainer)
    running = client.wait_for_job_status(name, {"Running"}, timeout=JOB_TIMEOUT_SECONDS)
    followed: list[str] = []
    status_at_first_line = ""
    for line in client.get_job_logs(name, follow=True):
        if not followed:
            status_at_first_line = client.get_job(name).status
        followed.append(line)
    complete = client.wait_for_job_status(name, timeout=JOB_TIMEOUT_SECONDS)
    return TrainedFunction(sdk, name, running, followed, status_at_first_line, complete)


def test_verify_backend_finds_kubetrains_version_configmap_in_kubeflow_system_namespace(
    sdk: SdkCluster, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    unavailable = "Trainer control-plane version info is not available"
    with caplog.at_level(logging.WARNING, logger="kubeflow.trainer.backends.kubernetes.backend"):
        _client(sdk.cluster, sdk.namespace)
        assert unavailable not in caplog.text
        # The check is live: where kubetrain is not installed (the SDK's default namespace), it warns.
        monkeypatch.delenv("KUBEFLOW_SYSTEM_NAMESPACE")
        _client(sdk.cluster, sdk.namespace)
        assert "namespace 'kubeflow-system'" in caplog.text and unavailable in caplog.text
    data = sdk.cluster.api.get(f"/api/v1/namespaces/{OPERATOR_NAMESPACE}/configmaps/kubeflow-trainer-public")
    assert data["data"] == {"kubeflow_trainer_version": "v2.3.0"}


def test_list_runtimes_lists_the_operators_builtins_with_their_frameworks(sdk: SdkCluster) -> None:
    runtimes = {runtime.name: runtime for runtime in sdk.client.list_runtimes()}

    assert {name: runtimes[name].trainer.framework for name in BUILTIN_RUNTIMES} == BUILTIN_RUNTIMES
    assert runtimes[LOCAL_RUNTIME].trainer.framework == "torch"
    for name, runtime in runtimes.items():
        builtin = runtime.trainer.framework == "torchtune"
        expected = sdk_types.TrainerType.BUILTIN_TRAINER if builtin else sdk_types.TrainerType.CUSTOM_TRAINER
        assert runtime.trainer.trainer_type == expected, name


def test_get_runtime_reads_the_local_runtimes_image_nodes_and_torchrun_entrypoint(sdk: SdkCluster) -> None:
    runtime = sdk.client.get_runtime(LOCAL_RUNTIME)

    assert runtime.kind == sdk_types.RuntimeKind.CLUSTER_TRAINING_RUNTIME
    assert (runtime.trainer.image, runtime.trainer.num_nodes) == (PYTORCH_IMAGE, 1)
    assert runtime.trainer.command == sdk_constants.TORCH_COMMAND


def test_train_ships_the_function_in_torchruns_command_on_two_nodes(trained: TrainedFunction) -> None:
    api, namespace = trained.sdk.cluster.api, trained.sdk.namespace
    spec = trainjob(api, namespace, trained.name)["spec"]

    assert spec["runtimeRef"] == {
        "name": LOCAL_RUNTIME,
        "kind": "ClusterTrainingRuntime",
        "apiGroup": "trainer.kubeflow.org",
    }
    assert spec["trainer"]["numNodes"] == 2
    bash, dash_c, script = spec["trainer"]["command"]
    assert (bash, dash_c) == ("bash", "-c")
    assert "def train_ddp(steps: int) -> None:" in script
    assert "train_ddp(**{'steps': 20})" in script
    assert 'torchrun "test_kubeflow_sdk.py"' in script
    pods = jobset_pods(api, namespace, trained.name)
    assert [pod["spec"]["containers"][0]["command"] for pod in pods] == [spec["trainer"]["command"]] * 2
    assert {pod["spec"]["nodeName"] for pod in pods} == {realnode.NODE_NAME}


def test_wait_for_job_status_sees_the_job_running_then_complete(trained: TrainedFunction) -> None:
    assert trained.running.status == "Running"
    assert [step.status for step in trained.running.steps] == ["Running", "Running"]
    assert trained.complete.status == "Complete"


def test_get_job_reads_a_step_per_node_from_the_pods(trained: TrainedFunction) -> None:
    job = trained.sdk.client.get_job(trained.name)
    pods = jobset_pods(trained.sdk.cluster.api, trained.sdk.namespace, trained.name)

    assert (job.name, job.num_nodes, job.runtime.name) == (trained.name, 2, LOCAL_RUNTIME)
    # The SDK lists steps newest pod first (by creation time): their order is not the nodes'.
    steps = sorted(job.steps, key=lambda s: s.name)
    assert [(s.name, s.pod_name, s.status) for s in steps] == [
        ("node-0", pods[0]["metadata"]["name"], "Succeeded"),
        ("node-1", pods[1]["metadata"]["name"], "Succeeded"),
    ]
    # From the PET_NPROC_PER_NODE the operator set (no GPU, no CPU request: one process per node).
    assert [s.device_count for s in steps] == ["1", "1"]


def test_get_job_logs_reads_the_functions_output_on_each_node(trained: TrainedFunction) -> None:
    for rank, step in enumerate(("node-0", "node-1")):
        lines = list(trained.sdk.client.get_job_logs(trained.name, step=step))
        steps = [line for line in lines if line.startswith(f"rank {rank}/2 step ")]
        assert len(steps) == STEPS, lines
        first, last = (float(line.rsplit(" ", 1)[1]) for line in (steps[0], steps[-1]))
        assert last < first


def test_get_job_logs_follow_streams_node_0_while_it_trains(trained: TrainedFunction) -> None:
    assert trained.status_at_first_followed_line == "Running"
    steps = [line for line in trained.followed if line.startswith("rank 0/2 step ")]
    assert [line.split()[3] for line in steps] == [str(step) for step in range(STEPS)]


def test_list_jobs_lists_the_trainjob_by_its_runtime(trained: TrainedFunction) -> None:
    client = trained.sdk.client
    listed = {job.name: job for job in client.list_jobs()}
    by_runtime = [job.name for job in client.list_jobs(runtime=client.get_runtime(LOCAL_RUNTIME))]
    by_other = [job.name for job in client.list_jobs(runtime=client.get_runtime("torch-distributed"))]

    assert listed[trained.name].status == "Complete"
    assert listed[trained.name].runtime.name == LOCAL_RUNTIME
    assert trained.name in by_runtime
    assert trained.name not in by_other


def test_get_job_events_reads_each_nodes_pod_events(trained: TrainedFunction) -> None:
    events = trained.sdk.client.get_job_events(trained.name)
    pods = [step.pod_name for step in trained.complete.steps]

    for pod in pods:
        reasons = [
            e.reason for e in events if (e.involved_object_kind, e.involved_object_name) == ("Pod", pod)
        ]
        assert {"Pulled", "Created", "Started"} <= set(reasons), events
    assert {e.involved_object_name for e in events} <= {trained.name, *pods}
    assert [e.event_time for e in events] == sorted(e.event_time for e in events)


def _namespaced_runtime(sdk: SdkCluster) -> None:
    _create_once(
        sdk.cluster, f"{TRAINJOBS}/namespaces/{sdk.namespace}/trainingruntimes", NODES_SAY_HELLO_RUNTIME
    )


def test_train_runs_a_custom_trainer_containers_image_on_every_node(sdk: SdkCluster) -> None:
    _namespaced_runtime(sdk)
    client = sdk.client
    runtime = client.get_runtime(NODES_SAY_HELLO)
    assert runtime.kind == sdk_types.RuntimeKind.TRAINING_RUNTIME
    trainer = CustomTrainerContainer(image=TEST_IMAGE, num_nodes=2, env={"GREETING": "hello"})

    name = client.train(runtime=runtime, trainer=trainer)
    job = client.wait_for_job_status(name, timeout=JOB_TIMEOUT_SECONDS)

    assert sorted((step.name, step.status) for step in job.steps) == [
        ("node-0", "Succeeded"),
        ("node-1", "Succeeded"),
    ]
    for rank, step in enumerate(("node-0", "node-1")):
        assert list(client.get_job_logs(name, step=step)) == [f"node {rank} of 2 hello"]
    for pod in jobset_pods(sdk.cluster.api, sdk.namespace, name):
        assert pod["spec"]["containers"][0]["image"] == TEST_IMAGE


def test_delete_job_deletes_the_trainjob_its_jobset_and_its_pods(sdk: SdkCluster) -> None:
    _namespaced_runtime(sdk)
    client = sdk.client
    trainer = CustomTrainerContainer(image=TEST_IMAGE, num_nodes=1, env={"GREETING": "bye"})
    name = client.train(runtime=client.get_runtime(NODES_SAY_HELLO), trainer=trainer)
    client.wait_for_job_status(name, timeout=JOB_TIMEOUT_SECONDS)
    api, namespace = sdk.cluster.api, sdk.namespace
    assert api.exists(f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets/{name}")

    client.delete_job(name)

    wait_until(
        "the TrainJob gone", lambda: not api.exists(f"{TRAINJOBS}/namespaces/{namespace}/trainjobs/{name}")
    )
    wait_until(
        "its JobSet gone",
        lambda: not api.exists(f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets/{name}"),
    )
    wait_until("its pods gone", lambda: not jobset_pods(api, namespace, name))
    assert name not in [job.name for job in client.list_jobs()]
