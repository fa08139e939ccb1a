"""JAX multi-process on CPU: every process joins the coordinator a JAXJob names, then a psum runs
across all of them over gloo and is checked.

A JAXJob injects COORDINATOR_ADDRESS (host), COORDINATOR_PORT, NUM_PROCESSES and PROCESS_ID;
worker-0 hosts the coordination service.
"""

from __future__ import annotations

import os
import sys

import jax
import jax.numpy as jnp


def main() -> int:
    # CPU collectives across processes need an explicit implementation; gloo ships with jaxlib.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # type: ignore[no-untyped-call]
    process_id, processes = int(os.environ["PROCESS_ID"]), int(os.environ["NUM_PROCESSES"])
    coordinator = f"{os.environ['COORDINATOR_ADDRESS']}:{os.environ['COORDINATOR_PORT']}"
    jax.distributed.initialize(
        coordinator_address=coordinator, num_processes=processes, process_id=process_id
    )
    print(f"process {jax.process_index()} of {jax.process_count()}, {jax.device_count()} devices in all")

    # Each process contributes (its id + 1) on its one local device; psum adds them over all devices.
    local = jnp.array([float(process_id + 1)] * jax.local_device_count())

    def add_over_devices(x: jax.Array) -> jax.Array:
        total: jax.Array = jax.lax.psum(x, "i")  # type: ignore[no-untyped-call]
        return total

    total = jax.pmap(add_over_devices, axis_name="i")(local)
    expected = processes * (processes + 1) / 2
    print(f"process {process_id}: psum = {float(total[0]):g} (expected {expected:g})")
    jax.distributed.shutdown()  # type: ignore[no-untyped-call]
    return 0 if float(total[0]) == expected else 1


if __name__ == "__main__":
    sys.exit(main())
