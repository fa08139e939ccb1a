"""``kubetrain get`` and ``kubetrain logs`` for jobs run by ``kubetrain run`` on this machine.

The commands talk to a ``JobSource``; ``--local`` selects the state directory. A cluster source
(the API server) plugs in beside it without changing the commands' output.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol, TextIO

import typer
import yaml
from rich.console import Console
from rich.table import Table

from kubetrain.local.state import STATE_DIR_ENV, RunDirectory, RunRecord, default_state_dir, list_runs

FOLLOW_POLL = 0.2


@dataclass(frozen=True)
class JobView:
    """What ``get`` shows about one job, wherever it runs."""

    name: str
    kind: str
    state: str
    replicas: list[tuple[str, str, int, int | None]]
    """(replica, phase, restarts, pid) per replica."""
    age_seconds: float | None
    wire: dict[str, object]
    message: str


class JobSource(Protocol):
    def jobs(self, name: str | None) -> list[JobView]: ...

    def log_lines(self, job: str, replica: str | None, follow: bool) -> Iterator[tuple[str, str]]: ...


def _state(record: RunRecord) -> str:
    conditions = [c for c in record.job.get("status", {}).get("conditions", []) if c.get("status") == "True"]
    state = str(conditions[-1]["type"]) if conditions else "Created"
    if record.stale:
        return f"{state} (stale: runner {record.runner_pid} is gone)"
    if record.interrupted:
        return f"{state} (interrupted)"
    return state


def _message(record: RunRecord) -> str:
    conditions = [c for c in record.job.get("status", {}).get("conditions", []) if c.get("status") == "True"]
    return str(conditions[-1].get("message", "")) if conditions else ""


class LocalJobSource:
    """Runs recorded under a state directory."""

    def __init__(self, state_dir: Path) -> None:
        self.state_dir = state_dir

    def jobs(self, name: str | None) -> list[JobView]:
        records = list_runs(self.state_dir)
        if name is not None:
            records = [r for r in records if r.name == name]
        return [self._view(r) for r in records]

    def _view(self, record: RunRecord) -> JobView:
        start = record.job.get("status", {}).get("startTime")
        age = None
        if isinstance(start, str):
            age = time.time() - datetime.fromisoformat(start.replace("Z", "+00:00")).timestamp()
        return JobView(
            name=record.name,
            kind=str(record.job.get("kind", "")),
            state=_state(record),
            replicas=[(r.name, r.phase, r.restarts, r.pid) for r in record.replicas],
            age_seconds=age,
            wire=record.job,
            message=_message(record),
        )

    def log_lines(self, job: str, replica: str | None, follow: bool) -> Iterator[tuple[str, str]]:
        directory = RunDirectory(self.state_dir, job)
        record = directory.read()
        if record is None:
            raise LookupError(f"no local run of job {job!r} under {self.state_dir}")
        names = [r.name for r in record.replicas]
        if replica is not None and replica not in names:
            raise LookupError(f"job {job} has no replica {replica!r}; it has: {', '.join(names)}")
        wanted = [replica] if replica is not None else names
        offsets = dict.fromkeys(wanted, 0)
        partial = dict.fromkeys(wanted, "")
        while True:
            for name in wanted:
                path = directory.log_path(name)
                if not path.exists():
                    continue
                with path.open("r", encoding="utf-8", errors="replace") as handle:
                    handle.seek(offsets[name])
                    chunk = handle.read()
                    offsets[name] = handle.tell()
                text = partial[name] + chunk
                *complete, partial[name] = text.split("\n")
                for line in complete:
                    yield name, line
            if not follow:
                break
            current = directory.read()
            if current is None or current.finished or current.stale:
                follow = False  # one last read picks up whatever was written before the end
                continue
            time.sleep(FOLLOW_POLL)
        for name in wanted:
            if partial[name]:
                yield name, partial[name]


def _source(local: bool, state_dir: Path | None) -> JobSource:
    if not local:
        typer.echo(
            "error: only local runs can be read so far: add --local (jobs started by `kubetrain run`)",
            err=True,
        )
        raise typer.Exit(2)
    return LocalJobSource(state_dir or default_state_dir())


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.0f}h"


def _print_table(views: list[JobView], out: Console) -> None:
    table = Table(box=None, pad_edge=False)
    for column in ("NAME", "KIND", "STATE", "REPLICAS", "RESTARTS", "AGE"):
        table.add_column(column)
    for view in views:
        running = sum(1 for _, phase, _, _ in view.replicas if phase == "Running")
        restarts = sum(r for _, _, r, _ in view.replicas)
        table.add_row(
            view.name,
            view.kind,
            view.state,
            f"{running}/{len(view.replicas)} running",
            str(restarts),
            _age(view.age_seconds),
        )
    out.print(table)


def _print_detail(view: JobView, out: Console) -> None:
    out.print(f"{view.kind} {view.name}: {view.state}")
    if view.message:
        out.print(f"  {view.message}")
    table = Table(box=None, pad_edge=False)
    for column in ("REPLICA", "PHASE", "RESTARTS", "PID"):
        table.add_column(column)
    for name, phase, restarts, pid in view.replicas:
        table.add_row(name, phase, str(restarts), str(pid or "-"))
    out.print(table)


def get(
    name: str | None = typer.Argument(None, help="A job name; all jobs when omitted."),
    local: bool = typer.Option(False, "--local", help="Jobs run on this machine by `kubetrain run`."),
    state_dir: Path | None = typer.Option(
        None, "--state-dir", envvar=STATE_DIR_ENV, help="Local runs' state."
    ),
    output: str = typer.Option("table", "--output", "-o", help="table, json or yaml."),
) -> None:
    """Show jobs and their replicas.

    Example: kubetrain get --local pytorch-ddp
    """
    views = _source(local, state_dir).jobs(name)
    if name is not None and not views:
        typer.echo(f"error: no job named {name!r}", err=True)
        raise typer.Exit(1)
    if output in ("json", "yaml"):
        wires = [v.wire for v in views]
        data: object = wires[0] if name is not None else {"apiVersion": "v1", "kind": "List", "items": wires}
        typer.echo(json.dumps(data, indent=2) if output == "json" else yaml.safe_dump(data, sort_keys=False))
        return
    if output != "table":
        typer.echo(f"error: --output {output!r}: supported values: table, json, yaml", err=True)
        raise typer.Exit(2)
    console = Console(highlight=False, width=200)
    if name is not None:
        _print_detail(views[0], console)
    else:
        _print_table(views, console)


def logs(
    job: str = typer.Argument(..., help="The job name."),
    local: bool = typer.Option(False, "--local", help="A job run on this machine by `kubetrain run`."),
    replica: str | None = typer.Option(
        None, "--replica", "-r", help="One replica, e.g. worker-1; all when omitted."
    ),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing until the run ends."),
    state_dir: Path | None = typer.Option(
        None, "--state-dir", envvar=STATE_DIR_ENV, help="Local runs' state."
    ),
) -> None:
    """Print a job's logs: one replica's as written, or every replica's with a prefix.

    Example: kubetrain logs --local pytorch-ddp -f --replica worker-1
    """
    source = _source(local, state_dir)
    out: TextIO = typer.get_text_stream("stdout")
    try:
        for name, line in source.log_lines(job, replica, follow):
            out.write(f"{line}\n" if replica is not None else f"{name} | {line}\n")
            out.flush()
    except LookupError as error:
        typer.echo(f"error: {error.args[0]}", err=True)
        raise typer.Exit(1) from None
