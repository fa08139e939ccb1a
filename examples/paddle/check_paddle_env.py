"""Checks the PADDLE_* environment a PaddleJob gives each replica, and that the replicas meet at
PADDLE_MASTER (no Paddle install needed).

Collective mode (workers only): every replica sees the job id, the node count and the master
address; worker-0's PADDLE_MASTER is its own address (``$(POD_IP_DUMMY)`` expanded from the
downward API), the others point at worker-0. As Paddle's launcher does, worker-0 then serves the
rendezvous on that port until every other node has joined, and the others connect to it, retrying
while worker-0's name does not resolve yet (on a cluster its DNS record appears only once its pod
is Ready). The script prints what it saw and exits non-zero on anything missing or inconsistent.
"""

from __future__ import annotations

import os
import socket
import sys
import time

JOIN_TIMEOUT_SECONDS = 120.0


def serve_rendezvous(port: int, peers: int) -> list[str]:
    """Accept one connection from each other node; returns the names they sent."""
    joined: list[str] = []
    with socket.create_server(("", port)) as server:
        server.settimeout(JOIN_TIMEOUT_SECONDS)
        while len(joined) < peers:
            connection, _ = server.accept()
            with connection:
                joined.append(connection.recv(256).decode())
                connection.sendall(b"ok")
    return joined


def join_rendezvous(host: str, port: int, me: str) -> str:
    """Connect to the master and announce this node, retrying until it answers; returns its reply."""
    deadline = time.monotonic() + JOIN_TIMEOUT_SECONDS
    while True:
        try:
            with socket.create_connection((host, port), timeout=5) as connection:
                connection.sendall(me.encode())
                return connection.recv(16).decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


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
    if "$(" in master or not port.isdigit() or not nodes.isdigit():
        problems.append(f"PADDLE_MASTER {master!r} is not host:port")
    elif os.environ.get("POD_IP_DUMMY") is not None:
        # Only the rendezvous node reads its own address from the downward API.
        joined = serve_rendezvous(int(port), int(nodes) - 1)
        print(f"master {master}: {len(joined) + 1} of {nodes} nodes joined ({', '.join(sorted(joined))})")
    else:
        me = socket.gethostname()
        try:
            reply = join_rendezvous(host, int(port), me)
            print(f"{me} joined the master at {master}: {reply}")
        except OSError as error:
            problems.append(f"could not join the master at {master}: {error}")
    for problem in problems:
        print(f"problem: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
