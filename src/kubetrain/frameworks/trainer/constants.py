"""Names Kubeflow Trainer v2.3.0 gives the objects, labels, containers and env it makes
(``pkg/constants/constants.go``): a runtime written for Trainer finds them here unchanged."""

from __future__ import annotations

ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
"""On a replicated job's template: which step of the TrainJob it runs (``trainer``, an initializer)."""
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"
"""On a runtime: its framework (``torch``, ``deepspeed``, ...); the Kubeflow SDK lists only labelled ones."""
SUPPORT_LABEL = "trainer.kubeflow.org/support"
WEBHOOK_VALIDATION_LABEL = "trainer.kubeflow.org/webhook-validation"

ANCESTOR_TRAINER = "trainer"
DATASET_INITIALIZER = "dataset-initializer"
MODEL_INITIALIZER = "model-initializer"
NODE = "node"
"""The trainer job's name in the built-in runtimes, and its training container's name in every runtime."""
LAUNCHER = "launcher"
INITIALIZER_VOLUME = "initializer"
STORAGE_URI_ENV = "STORAGE_URI"

TRAINER_PORT = 29500
DEFAULT_JOB_REPLICAS = 1

COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
COMPLETION_INDEX_FIELD_PATH = f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"

FIELD_OWNER = "trainer"
"""The server-side apply field manager of everything the TrainJob controller applies."""

SNAPSHOT_SUFFIX = "-runtime-snapshot"
SNAPSHOT_KEY = "runtime"

# torchrun
PET_NNODES = "PET_NNODES"
PET_NPROC_PER_NODE = "PET_NPROC_PER_NODE"
PET_NODE_RANK = "PET_NODE_RANK"
PET_MASTER_ADDR = "PET_MASTER_ADDR"
PET_MASTER_PORT = "PET_MASTER_PORT"
TORCH_RESERVED_ENV = frozenset(
    {PET_NNODES, PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT}
)
TORCHTUNE_ENTRYPOINT = ("tune", "run")

# XGBoost
DMLC_TRACKER_URI = "DMLC_TRACKER_URI"
DMLC_TRACKER_PORT = "DMLC_TRACKER_PORT"
DMLC_TASK_ID = "DMLC_TASK_ID"
DMLC_NUM_WORKER = "DMLC_NUM_WORKER"
XGBOOST_RESERVED_ENV = frozenset({DMLC_TRACKER_URI, DMLC_TRACKER_PORT, DMLC_TASK_ID, DMLC_NUM_WORKER})

# MPI
MPI_SSH_AUTH_SUFFIX = "-mpi-ssh-auth"
MPI_SSH_AUTH_VOLUME = "mpi-ssh-auth"
MPI_SSH_PRIVATE_KEY_FILE = "id_rsa"
MPI_SSH_PUBLIC_KEY_FILE = "id_rsa.pub"
MPI_SSH_PUBLIC_KEY = "ssh-publickey"
MPI_SSH_PRIVATE_KEY = "ssh-privatekey"
MPI_SSH_AUTHORIZED_KEYS = "authorized_keys"
MPI_SSH_AUTH_DEFAULT_MODE = 0o400
MPI_SSH_PRIVATE_KEY_MODE = 0o640
MPI_SSH_PUBLIC_KEY_MODE = 0o644
MPI_HOSTFILE_DIR = "/etc/mpi"
MPI_HOSTFILE_NAME = "hostfile"
MPI_HOSTFILE_SUFFIX = "-mpi-hostfile"
MPI_HOSTFILE_VOLUME = "mpi-hostfile"
OMPI_HOSTFILE = "OMPI_MCA_orte_default_hostfile"
OMPI_RSH_ARGS = "OMPI_MCA_plm_rsh_args"
OMPI_RSH_ARGS_DEFAULT = "-o ConnectionAttempts=10"
OMPI_KEEP_FQDN = "OMPI_MCA_orte_keep_fqdn_hostnames"
OMPI_DEFAULT_SLOTS = "OMPI_MCA_orte_set_default_slots"
MPI_RESERVED_ENV = frozenset({OMPI_HOSTFILE, OMPI_RSH_ARGS, OMPI_KEEP_FQDN, OMPI_DEFAULT_SLOTS})

# gang scheduling
COSCHEDULING_POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"

# conditions (trainjob_types.go)
SUSPENDED_MESSAGE = "TrainJob is suspended"
RESUMED_MESSAGE = "TrainJob is resumed"
DEADLINE_EXCEEDED_MESSAGE = "TrainJob exceeded its active deadline"
SUSPENDED_REASON = "Suspended"
RESUMED_REASON = "Resumed"
RUNTIME_NOT_SUPPORTED_REASON = "TrainingRuntimeNotSupported"
DEADLINE_EXCEEDED_REASON = "DeadlineExceeded"
RESOURCES_CREATION_FAILED_REASON = "TrainJobResourcesCreationFailed"
