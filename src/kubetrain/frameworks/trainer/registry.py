"""The plugins every runtime is planned with, in a fixed order.

Trainer registers its plugins in a Go map, so their order changes from one controller start to the next;
kubetrain fixes one: the plain policy before the framework ones (the trainer's own env first, the
framework's after it, as torch orders them), the gang policies, the JobSet; the objects are built with the
JobSet last, after the Secrets and ConfigMaps its pods mount.
"""

from __future__ import annotations

from kubetrain.frameworks.trainer.gang import CoschedulingPlugin, VolcanoPlugin
from kubetrain.frameworks.trainer.jax import JAXPlugin
from kubetrain.frameworks.trainer.jobset import JobSetPlugin
from kubetrain.frameworks.trainer.mpi import MPIPlugin
from kubetrain.frameworks.trainer.plainml import PlainMLPlugin
from kubetrain.frameworks.trainer.plugin import RuntimePlugin
from kubetrain.frameworks.trainer.torch import TorchPlugin
from kubetrain.frameworks.trainer.xgboost import XGBoostPlugin


def plugins() -> tuple[RuntimePlugin, ...]:
    """Every plugin, in the order their phases run.

    Trainer's ``TrainJobStatus`` plugin (the progress variables and token volume) is not among them: where
    pods report to is the substrate's to say, as for every kind (``kube.status.injection``, the local
    runner's endpoint)."""
    return (
        PlainMLPlugin(),
        TorchPlugin(),
        MPIPlugin(),
        JAXPlugin(),
        XGBoostPlugin(),
        CoschedulingPlugin(),
        VolcanoPlugin(),
        JobSetPlugin(),
    )
