"""The last lines a job kept of its failed replicas (``engine.failures``), as ``kubetrain logs`` prints them
for replicas whose pods are gone: each replica's lines after one line that says where they come from."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator

from kubetrain.engine.failures import FailureRecord, ReplicaFailure, describe_failure


def kept_log_lines(
    record: FailureRecord | None,
    live: Collection[str],
    selected: Callable[[ReplicaFailure], bool] = lambda failure: True,
    tail_lines: int | None = None,
) -> Iterator[tuple[str, str]]:
    """``(replica, line)`` for each kept failure of a selected replica not in ``live`` (the replicas whose
    pods exist, which their own logs show): a note naming the pod, how and when it failed, then its last
    lines (``tail_lines``: the last N of them)."""
    if record is None:
        return
    for failure in record.failures():
        if failure.replica in live or not selected(failure):
            continue
        lines = (failure.lines or "").splitlines()
        if tail_lines is not None:
            lines = lines[-tail_lines:] if tail_lines > 0 else []
        when = failure.at.strftime("%Y-%m-%dT%H:%M:%SZ")
        which = "its first failure" if failure is record.first else "its latest failure"
        shown = f"its last {len(lines)} line(s)" if lines else "no lines"
        yield (
            failure.replica,
            f"[kubetrain: pod {failure.pod} is gone; {shown} as kept on the job at {which}: "
            f"{describe_failure(failure)} at {when}]",
        )
        for line in lines:
            yield failure.replica, line
