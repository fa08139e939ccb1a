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
from kubetrain.frameworks.trainer.status import StatusPlugin, StatusServer
from kubetrain.frameworks.trainer.torch import TorchPlugin
from kubetrain.frameworks.trainer.xgboost import XGBoostPlugin


def plugins(status: StatusServer | None = None) -> tuple[RuntimePlugin, ...]:
    """Every plugin, in the order their phases run; the status plugin only where an endpoint serves."""
    found: list[RuntimePlugin] = [
        PlainMLPlugin(),
        TorchPlugin(),
        MPIPlugin(),
        JAXPlugin(),
        XGBoostPlugin(),
        CoschedulingPlugin(),
        VolcanoPlugin(),
    ]
    if status is not None:
        found.append(StatusPlugin(status))
    found.append(JobSetPlugin())
    return tuple(found)
