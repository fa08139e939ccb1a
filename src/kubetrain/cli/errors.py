"""How the CLI reports errors: one clear message on stderr and a documented exit status, no traceback."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

import typer

from kubetrain.api.errors import InvalidJobError

EXIT_INVALID_MANIFEST = 2


def fail_invalid(source: Path | str, error: InvalidJobError) -> NoReturn:
    """Report every problem of an invalid manifest, one per line, and exit with status 2."""
    lines = [f"error: {source}: invalid job manifest:"]
    lines += [f"  - {problem}" for problem in error.errors]
    typer.echo("\n".join(lines), err=True)
    raise typer.Exit(EXIT_INVALID_MANIFEST)
