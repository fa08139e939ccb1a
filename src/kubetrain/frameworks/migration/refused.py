"""The kinds no Trainer v2.3 runtime can run as they ran, and why: each refusal names the field at fault.

Trainer has no policy that writes ``TF_CONFIG``, ``PADDLE_*`` or ``MX_CONFIG``, and a runtime without one
(Trainer's "plain ML" runtime) sets no addresses at all: its pods would have to be told every peer's address
by hand, which is what the v1 operator did for them (upstream's advice for TensorFlow, kubeflow/trainer#2699).
"""

from __future__ import annotations

from kubetrain.api.errors import FieldError
from kubetrain.api.jobs import MXJob, PaddleJob, TFJob, TrainingJob
from kubetrain.frameworks.migration.result import NotMigratableError

PLAIN_RUNTIME_ADVICE = (
    "write a TrainingRuntime without mlPolicy that sets it for each node (kubeflow/trainer#2699), or keep "
    "the job on the v1 API, which kubetrain still runs"
)


def refuse_tensorflow(job: TFJob) -> NotMigratableError:
    reasons = [
        FieldError(
            job.replica_specs_path,
            "Trainer v2.3 has no TensorFlow policy: nothing writes TF_CONFIG (every replica's address and "
            "its own task), which MultiWorkerMirroredStrategy and parameter servers read; "
            f"{PLAIN_RUNTIME_ADVICE}",
        )
    ]
    for role in ("PS", "Evaluator"):
        if role in job.replica_specs:
            reasons.append(
                FieldError(
                    f"{job.replica_specs_path}.{role}",
                    f"a TrainJob has one trainer job whose nodes all train; the {role} role and the success "
                    "rules around it (the chief or worker 0 decides) have no counterpart",
                )
            )
    return NotMigratableError(reasons)


def refuse_paddle(job: PaddleJob) -> NotMigratableError:
    return NotMigratableError(
        [
            FieldError(
                job.replica_specs_path,
                "Trainer v2.3 has no Paddle policy: nothing sets PADDLE_MASTER, PADDLE_NNODES and "
                "PADDLE_JOB_ID, and worker 0's PADDLE_MASTER (its own pod IP) differs from the others', "
                f"which one template for every node cannot say; {PLAIN_RUNTIME_ADVICE}",
            )
        ]
    )


def refuse_mxnet(job: MXJob) -> NotMigratableError:
    return NotMigratableError(
        [
            FieldError(
                "kind",
                "MXJob left the training operator in v1.8 (MXNet is retired) and Trainer has no MXNet "
                "policy; keep the job on the v1 API, which kubetrain still runs",
            )
        ]
    )


def refusal(job: TrainingJob) -> NotMigratableError | None:
    """Why ``job`` cannot become a TrainJob, or None when its kind can."""
    if isinstance(job, TFJob):
        return refuse_tensorflow(job)
    if isinstance(job, PaddleJob):
        return refuse_paddle(job)
    if isinstance(job, MXJob):
        return refuse_mxnet(job)
    return None
