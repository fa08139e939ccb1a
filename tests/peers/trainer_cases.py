"""The TrainJob conformance cases: every built-in runtime of Kubeflow Trainer v2.3.0, the release's example
TrainJobs, and per runtime kind the status scenarios.

A runtime *kind* is an ML policy (torch, MPI, JAX, XGBoost, none: PlainML); its scenarios run on the release's
built-in runtime of that kind (PlainML's on the torch runtime less its policy): a success (every pod driven to
Succeeded, so the JobSet completes), a failure (a trainer pod failed past its Job's ``backoffLimit``, 0 in a
copy of the runtime), suspend and resume, ``activeDeadlineSeconds``, and ``runtimePatches``. Across kinds: the
initializers (dataset and model, on a torchtune runtime and on a runtime whose volume pods can mount here), an
MPI runtime with its launcher apart from the nodes, a coscheduling PodGroup runtime, and a TrainJob Trainer's
webhook refuses. The runtimes are read from the Trainer module as the release ships them; what a case derives
from one (a copy with ``backoffLimit: 0``) is a namespaced TrainingRuntime created beside the TrainJob on both
sides. No image runs: the pod driver plays the kubelet.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubetrain.envtest import peers
from kubetrain.envtest.kubeapi import KubeObject

from .peer_cases import example_jobs
from .peer_runner import Await, AwaitJobsStatus, AwaitPodsGone, Case, Fail, Patch, Run, Step, Succeed

API_VERSION = "trainer.kubeflow.org/v1alpha1"
RUNTIMES = Path("manifests") / "base" / "runtimes"
EXAMPLES = Path("examples") / "yaml"
IMAGE = "example.com/trainer:1"

SUSPEND = Patch({"spec": {"suspend": True}}, "suspend")
RESUME = Patch({"spec": {"suspend": False}}, "resume")
DEADLINE_SECONDS = 5
"""Long enough for the JobSet's Jobs and pods to be made and counted in the TrainJob's ``jobsStatus`` first
(what the JobSet said last before its deletion is what stays there), short enough to keep the case short."""
RESUME_TIMEOUT = 30.0
"""How long a resumed JobSet may take to make its Jobs again before the case is compared as it is."""
STARTED = AwaitJobsStatus({"node": {"active": 1}})
"""The node Job made, its pods too, and the TrainJob told so by the JobSet."""


def _kustomized(directory: Path) -> Iterator[Path]:
    """The files a kustomization's ``resources`` name, directories' kustomizations followed."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    for resource in kustomization.get("resources") or []:
        path = directory / resource
        yield from _kustomized(path) if path.is_dir() else (path,)


def release_runtimes() -> dict[str, KubeObject]:
    """The built-in ClusterTrainingRuntimes by name, as ``manifests/base/runtimes`` of the release has them
    (what its kustomization installs: not the data-cache one beside them)."""
    found = {}
    for path in _kustomized(peers.TRAINER.source() / RUNTIMES):
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict) and document.get("kind") == "ClusterTrainingRuntime":
                found[document["metadata"]["name"]] = document
    return found


BUILT_IN = release_runtimes()


def namespaced(runtime: KubeObject, name: str) -> KubeObject:
    """A copy of a ClusterTrainingRuntime as a TrainingRuntime of ``name`` (in the case's namespace)."""
    copied = copy.deepcopy(runtime)
    copied["kind"] = "TrainingRuntime"
    copied["metadata"] = {"name": name, "labels": dict(runtime["metadata"].get("labels") or {})}
    return copied


def without_retries(runtime: KubeObject, name: str) -> KubeObject:
    """The runtime with every Job's ``backoffLimit`` 0: one failed pod fails its Job, so the JobSet."""
    copied = namespaced(runtime, name)
    for job in copied["spec"]["template"]["spec"]["replicatedJobs"]:
        job["template"].setdefault("spec", {})["backoffLimit"] = 0
    return copied


def trainjob(
    name: str,
    runtime: str,
    trainer: dict[str, Any] | None = None,
    *,
    kind: str = "ClusterTrainingRuntime",
    **spec: Any,
) -> KubeObject:
    body: dict[str, Any] = {"runtimeRef": {"name": runtime, "kind": kind}}
    if trainer is not None:
        body["trainer"] = trainer
    body.update(spec)
    return {"apiVersion": API_VERSION, "kind": "TrainJob", "metadata": {"name": name}, "spec": body}


# --- runtime kinds ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuntimeKind:
    """An ML policy and how a job of it is driven."""

    name: str
    runtime: str
    """The built-in runtime its scenarios run on."""
    trainer: dict[str, Any]
    """The TrainJob's ``spec.trainer``."""
    jobs: tuple[str, ...] = ("node",)
    """Its replicated jobs in the order their pods start (an MPI launcher waits for the nodes)."""
    deciding: str = "node"
    """The replicated job whose end ends the JobSet (its success policy's target, or every job)."""
    without_policy: bool = False
    """The runtime's ML policy dropped (PlainML: no framework env at all)."""

    def base_runtime(self) -> KubeObject:
        runtime = BUILT_IN[self.runtime]
        if self.without_policy:
            runtime = copy.deepcopy(runtime)
            runtime["spec"]["mlPolicy"] = {"numNodes": runtime["spec"]["mlPolicy"].get("numNodes", 1)}
            runtime["metadata"]["labels"] = {}
        return runtime

    def runtime_ref(self, suffix: str = "") -> tuple[str, str, tuple[KubeObject, ...]]:
        """(name, kind, TrainingRuntimes to create) of this kind's runtime; ``suffix`` names a variant."""
        if not self.without_policy and not suffix:
            return self.runtime, "ClusterTrainingRuntime", ()
        name = f"{self.name}{suffix}"
        runtime = self.base_runtime()
        variant = without_retries(runtime, name) if suffix == "-no-retries" else namespaced(runtime, name)
        return name, "TrainingRuntime", (variant,)

    def run_all(self) -> tuple[Step, ...]:
        """Every pod Running and Ready, and the TrainJob told that each Job is ready."""
        return (*(Run(job) for job in self.jobs), AwaitJobsStatus({job: {"ready": 1} for job in self.jobs}))

    def finish(self) -> tuple[Step, ...]:
        """The deciding job's pods succeed (the others, where the JobSet waits for them too, first)."""
        others = () if self.deciding != "node" else tuple(Succeed(j) for j in self.jobs if j != "node")
        return (*others, Succeed(self.deciding))


TORCH = RuntimeKind(
    "torch",
    "torch-distributed",
    {"numNodes": 2, "command": ["torchrun", "train.py"], "resourcesPerNode": {"requests": {"cpu": "2"}}},
)
MPI = RuntimeKind(
    "mpi",
    "deepspeed-distributed",
    {"numNodes": 3, "command": ["mpirun", "python3", "train.py"], "numProcPerNode": 2},
    jobs=("node", "launcher"),
    deciding="launcher",
)
JAX = RuntimeKind("jax", "jax-distributed", {"numNodes": 2, "command": ["python3", "train.py"]})
XGBOOST = RuntimeKind(
    "xgboost",
    "xgboost-distributed",
    {
        "numNodes": 2,
        "command": ["python3", "train.py"],
        "env": [{"name": "XGBOOST_ROUNDS", "value": "10"}],
    },
)
PLAIN = RuntimeKind(
    "plainml",
    "torch-distributed",
    {"numNodes": 2, "image": IMAGE, "command": ["python3", "train.py"], "env": [{"name": "A", "value": "1"}]},
    without_policy=True,
)
KINDS = (TORCH, MPI, JAX, XGBOOST, PLAIN)

RUNTIME_PATCH = {
    "manager": "example.com/platform",
    "trainingRuntimeSpec": {
        "template": {
            "metadata": {"labels": {"team": "ml"}, "annotations": {"example.com/cost-center": "research"}},
            "spec": {
                "replicatedJobs": [
                    {
                        "name": "node",
                        "template": {
                            "metadata": {"labels": {"example.com/job": "patched"}},
                            "spec": {
                                "template": {
                                    "metadata": {"annotations": {"example.com/pod": "patched"}},
                                    "spec": {
                                        "tolerations": [
                                            {"key": "training", "operator": "Exists", "effect": "NoSchedule"}
                                        ],
                                        "volumes": [{"name": "scratch", "emptyDir": {}}],
                                        "containers": [
                                            {
                                                "name": "node",
                                                "volumeMounts": [
                                                    {"name": "scratch", "mountPath": "/scratch"}
                                                ],
                                            }
                                        ],
                                    },
                                }
                            },
                        },
                    }
                ]
            },
        }
    },
}
"""A platform team's patch: JobSet labels and annotations, a Job label, a pod annotation, a toleration and a
scratch volume mounted into the trainer container (env there is refused: Trainer's webhook)."""


def scenarios(kind: RuntimeKind) -> Iterator[Case]:
    name = kind.name

    def case(job: str, steps: tuple[Step, ...], variant: str = "", **spec: Any) -> Case:
        ref, ref_kind, prerequisites = kind.runtime_ref(variant)
        manifest = trainjob(job, ref, copy.deepcopy(kind.trainer), kind=ref_kind, **spec)
        return Case(job, manifest, steps, prerequisites)

    yield case(f"{name}-succeeds", (*kind.run_all(), *kind.finish(), Await("Complete")))
    # The trainer pod fails (an MPI job's launcher: its nodes run sshd, which does not end by itself).
    trainer_job = "launcher" if "launcher" in kind.jobs else "node"
    yield case(
        f"{name}-fails",
        (*kind.run_all(), Fail(trainer_job, 0, 1), Await("Failed")),
        variant="-no-retries",
    )
    yield case(
        f"{name}-suspended-resumed",
        (*kind.run_all(), SUSPEND, Await("Suspended"), AwaitPodsGone(), RESUME, *kind.run_all()),
    )
    yield case(
        f"{name}-created-suspended",
        (Await("Suspended"), AwaitJobsStatus({"node": {"suspended": 1}})),
        suspend=True,
    )
    yield case(
        f"{name}-deadline",
        (STARTED, Await("Failed"), AwaitPodsGone()),
        activeDeadlineSeconds=DEADLINE_SECONDS,
    )
    yield case(f"{name}-runtime-patches", (STARTED,), runtimePatches=[copy.deepcopy(RUNTIME_PATCH)])


# --- every built-in runtime ---------------------------------------------------------------------------------

TORCHTUNE_TRAINER = {
    "numNodes": 1,
    "command": ["tune", "run"],
    "args": ["batch_size=2", "epochs=1", "loss=torchtune.modules.loss.CEWithChunkedOutputLoss"],
    "resourcesPerNode": {"limits": {"nvidia.com/gpu": 2}},
}
"""What the Kubeflow SDK's ``BuiltinTrainer(TorchTuneConfig(...))`` makes of a fine-tuning run."""
INITIALIZER = {
    "dataset": {"storageUri": "hf://tatsu-lab/alpaca", "env": [{"name": "SPLIT", "value": "train[:100]"}]},
    "model": {"storageUri": "hf://meta-llama/Llama-3.2-1B-Instruct"},
}


def built_in_runtimes() -> Iterator[Case]:
    """A TrainJob on each built-in runtime, created and left to the JobSet controller (no pod driven) until
    its first Jobs' pods are made (a torchtune runtime's initializers: its nodes wait for them)."""
    trainers = {kind.runtime: kind.trainer for kind in KINDS if not kind.without_policy}
    initializers = AwaitJobsStatus({"dataset-initializer": {"active": 1}, "model-initializer": {"active": 1}})
    for name, runtime in sorted(BUILT_IN.items()):
        job = f"builtin-{name.replace('.', '-')}"
        framework = runtime["metadata"]["labels"].get("trainer.kubeflow.org/framework")
        if framework == "torchtune":
            manifest = trainjob(job, name, copy.deepcopy(TORCHTUNE_TRAINER), initializer=INITIALIZER)
            yield Case(job, manifest, (initializers,))
        else:
            trainer = trainers.get(name) or {"numNodes": 2, "command": ["python3", "train.py"]}
            yield Case(job, trainjob(job, name, copy.deepcopy(trainer)), (STARTED,))


# --- across kinds -------------------------------------------------------------------------------------------


def initializers_runtime(name: str) -> KubeObject:
    """torch-distributed with a dataset and a model initializer before the nodes, sharing an ``initializer``
    volume (an emptyDir: the torchtune runtimes' claim cannot be bound on envtest, so their pods never
    schedule)."""
    runtime = namespaced(BUILT_IN["torch-distributed"], name)
    spec = runtime["spec"]["template"]["spec"]
    [node] = spec["replicatedJobs"]
    mount = {"name": "initializer", "mountPath": "/workspace"}

    def step(step_name: str) -> KubeObject:
        return {
            "name": step_name,
            "template": {
                "metadata": {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": step_name}},
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": step_name,
                                    "image": f"ghcr.io/kubeflow/trainer/{step_name}:v2.3.0",
                                    "volumeMounts": [mount],
                                }
                            ],
                            "volumes": [{"name": "initializer", "emptyDir": {}}],
                        }
                    }
                },
            },
        }

    node["dependsOn"] = [
        {"name": "dataset-initializer", "status": "Complete"},
        {"name": "model-initializer", "status": "Complete"},
    ]
    node_pod = node["template"]["spec"]["template"]["spec"]
    node_pod["containers"][0]["volumeMounts"] = [mount]
    node_pod["volumes"] = [{"name": "initializer", "emptyDir": {}}]
    spec["replicatedJobs"] = [step("dataset-initializer"), step("model-initializer"), node]
    return runtime


def mpi_launcher_apart_runtime(name: str) -> KubeObject:
    """deepspeed-distributed with its launcher not one of the nodes (``runLauncherAsNode: false``)."""
    runtime = namespaced(BUILT_IN["deepspeed-distributed"], name)
    runtime["spec"]["mlPolicy"]["mpi"]["runLauncherAsNode"] = False
    return runtime


def coscheduling_runtime(name: str) -> KubeObject:
    """torch-distributed gang-scheduled: a scheduler-plugins PodGroup holding every pod."""
    runtime = namespaced(BUILT_IN["torch-distributed"], name)
    runtime["spec"]["podGroupPolicy"] = {"coscheduling": {"scheduleTimeoutSeconds": 120}}
    [node] = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    node["template"]["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "500m", "memory": "1Gi"}
    }
    return runtime


def across_kinds() -> Iterator[Case]:
    runtime = initializers_runtime("torch-with-initializers")
    job = "initializers-succeed"
    manifest = trainjob(job, "torch-with-initializers", copy.deepcopy(TORCH.trainer), kind="TrainingRuntime")
    manifest["spec"]["initializer"] = copy.deepcopy(INITIALIZER)
    steps: tuple[Step, ...] = (
        Run("dataset-initializer"),
        Run("model-initializer"),
        Succeed("dataset-initializer"),
        Succeed("model-initializer"),
        Run("node"),
        Succeed("node"),
        Await("Complete"),
    )
    yield Case(job, manifest, steps, (runtime,))

    job = "mpi-launcher-apart-succeeds"
    manifest = trainjob(job, "mpi-launcher-apart", copy.deepcopy(MPI.trainer), kind="TrainingRuntime")
    steps = (*MPI.run_all(), *MPI.finish(), Await("Complete"))
    yield Case(job, manifest, steps, (mpi_launcher_apart_runtime("mpi-launcher-apart"),))

    job = "coscheduling-succeeds"
    trainer = {
        **copy.deepcopy(TORCH.trainer),
        "resourcesPerNode": {"requests": {"cpu": "1", "memory": "2Gi"}},
    }
    manifest = trainjob(job, "torch-coscheduling", trainer, kind="TrainingRuntime")
    steps = (*TORCH.run_all(), *TORCH.finish(), Await("Complete"))
    yield Case(job, manifest, steps, (coscheduling_runtime("torch-coscheduling"),))

    # Resumed, a TrainJob whose runtime claims a volume (each torchtune runtime) has its JobSet applied again.
    job = "torchtune-resumed"
    manifest = trainjob(
        job, "torchtune-llama3.2-1b", copy.deepcopy(TORCHTUNE_TRAINER), initializer=INITIALIZER
    )
    manifest["spec"]["suspend"] = True
    initializers = ("dataset-initializer", "model-initializer")
    steps = (
        Await("Suspended"),
        AwaitJobsStatus({name: {"suspended": 1} for name in initializers}),
        RESUME,
        AwaitJobsStatus({name: {"active": 1} for name in initializers}, timeout=RESUME_TIMEOUT),
    )
    yield Case(job, manifest, steps)

    # What Trainer's webhook refuses (a variable torchrun's env is made of) kubetrain fails as InvalidSpec.
    job = "refused-reserved-env"
    trainer = {**copy.deepcopy(TORCH.trainer), "env": [{"name": "PET_NNODES", "value": "8"}]}
    yield Case(job, trainjob(job, "torch-distributed", trainer), (Await("Failed"),))


REFUSED_EXAMPLES = {"example-05-multi-step"}
"""Release examples Trainer's webhook refuses: 05's runtime mounts no ``initializer`` volume into its
dataset initializer, which a TrainJob with a dataset initializer needs (kubetrain fails it: InvalidSpec).
Their cases are named ``refused-<example>``, as every case Trainer refuses is."""


def release_examples() -> list[Case]:
    """The release's example TrainJobs (``examples/yaml``) that this envtest can hold, each with the runtime
    its file defines (a ClusterTrainingRuntime made namespaced, so that neither side's phase leaves one for
    the other), until its first pods are made (or it is suspended, or failed); Volcano's (04) is left out:
    its PodGroup CRD is not a Go module's to install here."""
    directory = peers.TRAINER.source() / EXAMPLES
    cases = []
    for case in example_jobs(directory, {"TrainJob"}, API_VERSION):
        path = directory / f"{case.name.removeprefix('example-')}.yaml"
        runtimes = [
            d
            for d in yaml.safe_load_all(path.read_text())
            if isinstance(d, dict) and d.get("kind") in ("TrainingRuntime", "ClusterTrainingRuntime")
        ]
        if any("volcano" in (r["spec"].get("podGroupPolicy") or {}) for r in runtimes):
            continue
        manifest = copy.deepcopy(case.manifest)
        prerequisites = []
        for runtime in runtimes:
            prerequisites.append(namespaced(runtime, runtime["metadata"]["name"]))
            manifest["spec"]["runtimeRef"]["kind"] = "TrainingRuntime"
        steps: tuple[Step, ...] = (STARTED,)
        if manifest["spec"].get("suspend"):
            steps = (Await("Suspended"), AwaitJobsStatus({"node": {"suspended": 1}}))
        name = case.name
        if name in REFUSED_EXAMPLES:
            name, steps = f"refused-{name}", (Await("Failed"),)
        cases.append(Case(name, manifest, steps, tuple(prerequisites)))
    return cases


def endpoint_cases() -> list[Case]:
    """The torch and MPI shapes again, for kubetrain at its defaults (its status endpoint on)."""
    cases = []
    for kind in (TORCH, MPI):
        job = f"endpoint-{kind.name}"
        cases.append(Case(job, trainjob(job, kind.runtime, copy.deepcopy(kind.trainer)), (STARTED,)))
    return cases


CASES: list[Case] = [
    *built_in_runtimes(),
    *release_examples(),
    *(case for kind in KINDS for case in scenarios(kind)),
    *across_kinds(),
]
ENDPOINT_CASES: list[Case] = endpoint_cases()
