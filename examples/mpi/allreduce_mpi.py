"""MPI over Open MPI: every rank allreduces its rank id and checks the sum.

An MPIJob runs this under ``mpirun`` on the launcher. On a cluster mpirun reaches the worker pods
over ssh; locally ``kubetrain run`` gives it a hostfile of ``localhost slots=<slots * workers>``
and mpirun starts every rank on this machine.
"""

from __future__ import annotations

import sys

from mpi4py import MPI


def main() -> int:
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    total = world.allreduce(rank, op=MPI.SUM)
    expected = size * (size - 1) // 2
    host = MPI.Get_processor_name()
    line = f"rank {rank} of {size} on {host}: allreduce of ranks = {total} (expected {expected})"
    # One write per line: mpirun forwards each rank's output as it comes, and may splice partial lines.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    return 0 if total == expected else 1


if __name__ == "__main__":
    sys.exit(main())
