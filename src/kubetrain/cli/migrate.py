"""``kubetrain migrate FILE...``: v1 jobs as Kubeflow Trainer v2 TrainJobs (and the runtimes they need)."""

from __future__ import annotations

import functools
import sys
import textwrap
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from kubetrain.api.errors import InvalidJobError
from kubetrain.api.jobs import TrainingJob
from kubetrain.api.manifest import load_documents, parse_job
from kubetrain.api.trainer import CLUSTER_TRAINING_RUNTIME
from kubetrain.cli.errors import fail_invalid
from kubetrain.cli.output import to_json
from kubetrain.frameworks.migration import Migration, NotMigratableError, migrate

if TYPE_CHECKING:
    import yaml

EXIT_REFUSED = 1
SERVER_METADATA = ("managedFields", "selfLink")
"""What an API server adds to a job's metadata that the job models do not read."""
COMMENT_WIDTH = 110


class Output(StrEnum):
    YAML = "yaml"
    JSON = "json"


def migrate_command(
    files: list[Path] = typer.Argument(
        ...,
        metavar="FILE...",
        help="v1 job manifests (YAML or JSON), one or more jobs each; - reads stdin (kubectl get -o yaml "
        "output too: the server's status and managed fields are left out).",
    ),
    output: Output = typer.Option(Output.YAML, "--output", "-o", help="Output format."),
    output_dir: Path | None = typer.Option(
        None,
        "--output-dir",
        file_okay=False,
        help="Write each job's runtime and TrainJob to DIR/<job name>.<yaml|json> and print the paths, "
        "instead of printing the manifests.",
    ),
) -> None:
    """Turn v1 training jobs into Kubeflow Trainer v2 TrainJobs whose processes find each other as before.

    Each PyTorchJob, XGBoostJob, JAXJob and MPIJob (v1 or v2beta1) becomes a TrainJob of the same name, on a
    built-in ClusterTrainingRuntime when that carries the job whole, else on a TrainingRuntime of its own,
    written first. What does not carry over, or changes, is said on stderr and in a comment at the top of the
    YAML. A TFJob, PaddleJob or MXJob is refused with the reason: no Trainer runtime sets their env.

    Exit status: 0 every job migrated, 1 some job refused (the others are still written), 2 invalid manifest.

    Example: kubetrain migrate examples/pytorch-ddp/job.yaml > trainjob.yaml && kubetrain run trainjob.yaml
    """
    jobs: list[tuple[str, TrainingJob]] = []
    for file in files:
        source = "<stdin>" if str(file) == "-" else str(file)
        try:
            text = sys.stdin.read() if str(file) == "-" else file.read_text(encoding="utf-8")
        except OSError as error:
            raise typer.BadParameter(f"cannot read {file}: {error.strerror}", param_hint="FILE...") from None
        try:
            jobs += [(source, parse_job(as_written(d), strict=True)) for d in load_documents(text)]
        except InvalidJobError as error:
            fail_invalid(source, error)
    written: list[tuple[TrainingJob, Migration]] = []
    refused = False
    for source, job in jobs:
        try:
            migration = migrate(job)
        except NotMigratableError as error:
            refused = True
            lines = [f"error: {source}: {job.KIND} {job.name} cannot become a TrainJob:"]
            typer.echo("\n".join([*lines, *(f"  - {reason}" for reason in error.reasons)]), err=True)
            continue
        typer.echo("\n".join(summary(job, migration)), err=True)
        written.append((job, migration))
    if output_dir is not None:
        _write(written, output, output_dir)
    elif output is Output.JSON:
        typer.echo(to_json(_list([d for _, m in written for d in m.documents()])))
    elif written:
        typer.echo("---\n".join(_yaml(job, migration) for job, migration in written), nl=False)
    if refused:
        raise typer.Exit(EXIT_REFUSED)


def as_written(document: dict[str, Any]) -> dict[str, Any]:
    """A job as a user writes it: without what an API server adds (``kubectl get -o yaml`` prints those)."""
    written = {k: v for k, v in document.items() if k != "status"}
    metadata = written.get("metadata")
    if isinstance(metadata, dict):
        written["metadata"] = {k: v for k, v in metadata.items() if k not in SERVER_METADATA}
    return written


def summary(job: TrainingJob, migration: Migration) -> list[str]:
    """What the job became, then each note: the lines for stderr and, commented, for the YAML."""
    ref = migration.trainjob.spec.runtime_ref
    kind = ref.kind or CLUSTER_TRAINING_RUNTIME
    where = f"the built-in {kind} {ref.name}" if migration.runtime is None else f"its own {kind} {ref.name}"
    head = f"{job.KIND} {job.name} ({job.API_VERSION}) becomes TrainJob {migration.trainjob.name} on {where}"
    if not migration.notes:
        return [f"{head}; everything carries over."]
    return [f"{head}. What changes or does not carry over:", *(f"- {note}" for note in migration.notes)]


def _yaml(job: TrainingJob, migration: Migration) -> str:
    comment = [
        line
        for entry in summary(job, migration)
        for line in textwrap.wrap(
            entry,
            COMMENT_WIDTH,
            initial_indent="# ",
            subsequent_indent="#   " if entry.startswith("- ") else "# ",
            break_on_hyphens=False,
        )
    ]
    import yaml

    # Wide lines: a shell line folded over two reads as two.
    body = yaml.dump_all(
        migration.documents(), Dumper=_dumper(), sort_keys=False, default_flow_style=False, width=1 << 16
    )
    return "\n".join([*comment, body])


def _list(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _write(written: list[tuple[TrainingJob, Migration]], output: Output, directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    names = [migration.trainjob.name for _, migration in written]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        typer.echo(
            f"error: more than one job is named {', '.join(twice)}: write them to separate directories",
            err=True,
        )
        raise typer.Exit(EXIT_REFUSED)
    for job, migration in written:
        path = directory / f"{migration.trainjob.name}.{output.value}"
        text = (
            _yaml(job, migration) if output is Output.YAML else to_json(_list(migration.documents())) + "\n"
        )
        path.write_text(text)
        typer.echo(str(path))


@functools.cache
def _dumper() -> type[yaml.SafeDumper]:
    """Block style, no anchors, and lists of numbers on one line (a podFailurePolicy's exit codes)."""
    import yaml

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

    def represent_list(dumper: yaml.SafeDumper, value: list[Any]) -> yaml.SequenceNode:
        numbers = bool(value) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        return dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=numbers)

    Dumper.add_representer(list, represent_list)
    return Dumper
