"""``kubetrain manifests``: the Kubernetes manifests kubetrain needs, generated from its models."""

from __future__ import annotations

from pathlib import Path

import typer

from kubetrain.frameworks.crds import (
    DEFAULT_MPI_API,
    MpiApi,
    all_crds,
    api_reference,
    crd_file_name,
    crd_file_text,
    crds_text,
    with_api_reference,
)

app = typer.Typer(name="manifests", help="Print or write the Kubernetes manifests kubetrain needs.")


@app.command()
def crds(
    mpi_api: MpiApi = typer.Option(
        DEFAULT_MPI_API,
        "--mpi-api",
        help="Which MPIJob CRD to include; only one can be installed (both are mpijobs.kubeflow.org).",
    ),
    kind: list[str] = typer.Option(
        [], "--kind", help="Only this kind's CRD (repeatable; any case, e.g. PyTorchJob)."
    ),
    output_dir: Path | None = typer.Option(
        None,
        "--output-dir",
        help="Write one kubeflow.org_<plural>.yaml per CRD here instead of printing them.",
        file_okay=False,
    ),
) -> None:
    """Print the CustomResourceDefinitions of every kind as one multi-document YAML.

    Example: kubetrain manifests crds | kubectl apply -f -

    Example: kubetrain manifests crds --mpi-api v1 --kind MPIJob --output-dir manifests/crds-mpijob-v1
    """
    chosen = all_crds(mpi_api)
    if kind:
        wanted = {k.lower() for k in kind}
        known = {crd["spec"]["names"]["kind"].lower() for crd in chosen}
        unknown = sorted(wanted - known)
        if unknown:
            typer.echo(
                f"error: --kind {', '.join(unknown)} is not a kind kubetrain serves; "
                f"use one of {', '.join(sorted(crd['spec']['names']['kind'] for crd in chosen))}",
                err=True,
            )
            raise typer.Exit(2)
        chosen = [crd for crd in chosen if crd["spec"]["names"]["kind"].lower() in wanted]
    if output_dir is None:
        typer.echo(crds_text(chosen), nl=False)
        return
    output_dir.mkdir(parents=True, exist_ok=True)
    for crd in chosen:
        (output_dir / crd_file_name(crd)).write_text(crd_file_text(crd))
        typer.echo(f"wrote {output_dir / crd_file_name(crd)}", err=True)


@app.command("api-reference")
def api_reference_command(
    update: Path | None = typer.Option(
        None,
        "--update",
        help="Rewrite the generated section of this Markdown file (between its BEGIN and END markers).",
        dir_okay=False,
        exists=True,
    ),
) -> None:
    """Print the field tables and CEL rules of every kind, as Markdown (the generated part of docs/api.md).

    Example: kubetrain manifests api-reference --update docs/api.md
    """
    if update is None:
        typer.echo(api_reference(), nl=False)
        return
    try:
        update.write_text(with_api_reference(update.read_text()))
    except ValueError as error:
        typer.echo(f"error: {update}: {error}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"updated {update}", err=True)
