"""Checks the PADDLE_* environment a PaddleJob gives each replica (no Paddle install needed).

Collective mode (workers only): every replica sees the job id, the node count and the master
address; worker-0's PADDLE_MASTER is its own address (``$(POD_IP_DUMMY)`` expanded from the
downward API), the others point at worker-0. The script prints what it saw and exits non-zero on
anything missing or inconsistent.
"""

from __future__ import annotations

import os
import socket
import sys


def main() -> int:
    problems = []
    job_id = os.environ.get("PADDLE_JOB_ID", "")
    nodes = os.environ.get("PADDLE_NNODES", "")
    master = os.environ.get("PADDLE_MASTER", "")
    print(f"PADDLE_JOB_ID={job_id} PADDLE_NNODES={nodes} PADDLE_MASTER={master}")
    expected_nodes = os.environ.get("EXPECTED_NNODES")
    if not job_id:
        problems.append("PADDLE_JOB_ID is empty")
    if expected_nodes and nodes != expected_nodes:
        problems.append(f"PADDLE_NNODES is {nodes!r}, expected {expected_nodes}")
    host, _, port = master.rpartition(":")
    if "$(" in master or not port.isdigit():
        problems.append(f"PADDLE_MASTER {master!r} is not host:port")
    else:
        try:
            socket.getaddrinfo(host, int(port))
        except OSError as error:
            problems.append(f"PADDLE_MASTER host {host!r} does not resolve: {error}")
    for problem in problems:
        print(f"problem: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
