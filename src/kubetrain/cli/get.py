"""``kubetrain get [KIND] [NAME]``: jobs as a table (the CRD's printer columns plus replicas and restarts), or
as YAML, JSON or names; ``-w`` keeps printing rows as they change. TrainJobs are listed beside the v1 jobs
(locally, a TrainJob's run as that TrainJob), their state and nodes read from their pods."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from enum import StrEnum
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from kubetrain.api.summary import JobSummary, LiveCounts
from kubetrain.cli.jobs import (
    ContextOption,
    KubeconfigOption,
    LocalOption,
    NamespaceOption,
    StateDirOption,
    Target,
    complete_kind,
    find_job,
    kind_name,
    reported_errors,
    split_kind_and_name,
)
from kubetrain.cli.output import to_json, to_yaml
from kubetrain.local.state import default_state_dir, list_runs
from kubetrain.sdk import tables
from kubetrain.sdk.selectors import matches

if TYPE_CHECKING:
    from kubetrain.sdk import TrainingClient
    from kubetrain.sdk.kinds import Job, JobKind

WATCH_INTERVAL = 1.0


class Output(StrEnum):
    TABLE = "table"
    WIDE = "wide"
    YAML = "yaml"
    JSON = "json"
    NAME = "name"


Live = Callable[[Mapping[str, Any]], LiveCounts]
"""What a listed job's pods show (restarts of its live replicas, a TrainJob's nodes), by its wire form."""


def _cluster_jobs(
    client: TrainingClient, kind: JobKind | None, name: str | None, all_namespaces: bool, selector: str | None
) -> tuple[list[dict[str, Any]], Live]:
    jobs: list[Job]
    if name is not None:
        jobs = [find_job(client, kind, name)]
    else:
        jobs = client.list_jobs(
            job_kind=kind_name(kind) if kind else None,
            all_kinds=kind is None,
            all_namespaces=all_namespaces,
            label_selector=selector,
        )

    def live(wire: Mapping[str, Any]) -> LiveCounts:
        summary = JobSummary.from_wire(wire)
        return client.get_job_live_counts(summary.name, summary.namespace, summary.kind)

    return [job.to_wire() for job in jobs], live


def _local_runs(
    state_dir: Path | None, kind: JobKind | None, selector: str | None
) -> tuple[list[dict[str, Any]], Live]:
    """Every local run, read from its record: no client and no job model (a listing's whole start-up cost
    would otherwise be importing and building them)."""
    records = list_runs(state_dir or default_state_dir())
    live = {record.name: LiveCounts(record.restarts, record.nodes) for record in records}
    wires = [record.job_wire() for record in records]
    if kind is not None:
        wires = [w for w in wires if (w.get("kind"), w.get("apiVersion")) == (kind.kind, kind.api_version)]
    wires = [w for w in wires if matches(selector, (w.get("metadata") or {}).get("labels") or {})]
    return wires, lambda wire: live.get(JobSummary.from_wire(wire).name, LiveCounts(0))


def _print_table(rows: list[tables.JobRow], header: list[str], with_header: bool) -> None:
    # kubectl's plain columns, on a terminal and in a pipe alike (awk and grep read them).
    lines = tables.plain_table(header, [tables.cells(row, header) for row in rows]).splitlines()
    typer.echo("\n".join(lines if with_header else lines[1:]))


def get(
    kind_or_name: str | None = typer.Argument(
        None,
        metavar="[KIND]",
        help="pytorchjob(s), tfjob, pytorch, ... or KIND/NAME; every kind when omitted.",
        autocompletion=complete_kind,
    ),
    name: str | None = typer.Argument(None, metavar="[NAME]", help="One job; all jobs when omitted."),
    namespace: str | None = NamespaceOption,
    all_namespaces: bool = typer.Option(False, "--all-namespaces", "-A", help="Jobs of every namespace."),
    output: Output = typer.Option(Output.TABLE, "--output", "-o", help="table, wide, yaml, json or name."),
    selector: str | None = typer.Option(None, "--selector", "-l", help="Label selector: a=b,c!=d,e,!f."),
    watch: bool = typer.Option(
        False, "--watch", "-w", help="After listing, print a row whenever a job changes."
    ),
    local: bool = LocalOption,
    state_dir: Path | None = StateDirOption,
    kubeconfig: Path | None = KubeconfigOption,
    context: str | None = ContextOption,
) -> None:
    """Show jobs: NAME, STATE, PROGRESS and AGE (the CRDs' printer columns), ETA, REPLICAS (active/desired)
    and RESTARTS; -o wide adds the latest metrics.

    A Kubeflow Trainer TrainJob's STATE is Complete, Failed, Suspended or Stalled by its conditions, else
    Running once all its nodes run, else Created (as the Kubeflow SDK says); NODES (REPLICAS among other
    kinds) counts its active training nodes of spec.trainer.numNodes.

    Example: kubetrain get pytorchjobs -n team-a

    Example: kubetrain get trainjobs

    Example: kubetrain get --local

    Example: kubetrain get tfjob mnist -o yaml
    """
    with reported_errors():
        kind, job_name = split_kind_and_name(kind_or_name, name)
        listed: Callable[[], tuple[list[dict[str, Any]], Live]]
        if local and job_name is None:
            listed = partial(_local_runs, state_dir, kind, selector)
            where = "local runs"
        else:
            client = Target(local, state_dir, kubeconfig, context, namespace).client()
            listed = partial(_cluster_jobs, client, kind, job_name, all_namespaces, selector)
            where = "any namespace" if all_namespaces else f"namespace {client.namespace}"
        wires, live = listed()
        if output in (Output.YAML, Output.JSON):
            data: object = (
                wires[0] if job_name is not None else {"apiVersion": "v1", "kind": "List", "items": wires}
            )
            typer.echo(to_json(data) if output is Output.JSON else to_yaml([data]), nl=output is Output.JSON)
            return
        if output is Output.NAME:
            for wire in wires:
                typer.echo(tables.qualified_name(JobSummary.from_wire(wire)))
            return
        header = tables.columns(
            all_namespaces=all_namespaces and not local,
            several_kinds=kind is None,
            wide=output is Output.WIDE,
            nodes=kind is not None and kind.is_trainjob,
        )
        rows = _rows(wires, live)
        if not rows and not watch:
            typer.echo(f"No jobs found in {where}.", err=True)
            return
        _print_table(rows, header, with_header=True)
        seen = {(r.namespace, r.kind, r.name): r for r in rows}
        while watch:
            time.sleep(WATCH_INTERVAL)
            for row in _rows(*listed()):
                key = (row.namespace, row.kind, row.name)
                previous = seen.get(key)
                if previous is None or _changed(previous, row):
                    _print_table([row], header, with_header=False)
                seen[key] = row


def _changed(previous: tables.JobRow, row: tables.JobRow) -> bool:
    """What a watch prints a row again for: not AGE or ETA, which change every second on their own."""
    return (previous.state, previous.progress, previous.replicas, previous.restarts) != (
        row.state,
        row.progress,
        row.replicas,
        row.restarts,
    )


def _rows(wires: list[dict[str, Any]], live: Live) -> list[tables.JobRow]:
    now = datetime.now(UTC)
    rows = []
    for wire in wires:
        counts = live(wire)
        rows.append(tables.job_row(JobSummary.from_wire(wire, counts.nodes), counts.restarts, now))
    return rows
