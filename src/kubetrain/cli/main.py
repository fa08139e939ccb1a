"""Entry point of the ``kubetrain`` command: one typer app, one module per command group.

Each command's module is imported only when that command runs (or when help lists every command): importing
them all made every ``kubetrain version`` pay for the operator, aiohttp, lightkube and the pydantic models,
about 2 s here, where kubectl answers in 0.1 s. ``tests/unit/cli/test_cli_imports.py`` checks the rule and
``bench/cli_latency.py`` measures it.
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib
from collections.abc import Iterator, MutableMapping
from typing import Any

import typer
from typer.core import TyperGroup
from typer.main import get_command

from kubetrain import __version__

COMMANDS: dict[str, tuple[str, str]] = {
    "plan": ("kubetrain.cli.plan", "plan"),
    "run": ("kubetrain.cli.run", "run_command"),
    "migrate": ("kubetrain.cli.migrate", "migrate_command"),
    "operator": ("kubetrain.cli.operator", "operator"),
    "submit": ("kubetrain.cli.submit", "submit"),
    "get": ("kubetrain.cli.get", "get"),
    "describe": ("kubetrain.cli.describe", "describe"),
    "logs": ("kubetrain.cli.logs", "logs"),
    "wait": ("kubetrain.cli.wait", "wait"),
    "delete": ("kubetrain.cli.manage", "delete"),
    "suspend": ("kubetrain.cli.manage", "suspend"),
    "resume": ("kubetrain.cli.manage", "resume"),
    "scale": ("kubetrain.cli.manage", "scale"),
    "dashboard": ("kubetrain.cli.dashboard", "dashboard"),
}
"""Command name → (module, function): the function is the command, its signature its arguments."""

GROUPS: dict[str, tuple[str, str]] = {
    "envtest": ("kubetrain.cli.envtest", "app"),
    "manifests": ("kubetrain.cli.manifests", "app"),
}
"""Command group name → (module, its typer app)."""


def _load(name: str) -> Any:  # a click Command
    if name in GROUPS:
        module, attribute = GROUPS[name]
        group: typer.Typer = getattr(importlib.import_module(module), attribute)
        return get_command(group)
    module, attribute = COMMANDS[name]
    single = typer.Typer(add_completion=False, pretty_exceptions_enable=False)
    single.command(name)(getattr(importlib.import_module(module), attribute))
    return get_command(single)


class _Commands(MutableMapping[str, Any]):
    """The group's commands by name, each made (its module imported) when first looked up."""

    def __init__(self, eager: MutableMapping[str, Any]) -> None:
        self._made = dict(eager)
        self._order = [*eager, *COMMANDS, *GROUPS]

    def __getitem__(self, name: str) -> Any:
        if name not in self._made:
            if name not in COMMANDS and name not in GROUPS:
                raise KeyError(name)
            self._made[name] = _load(name)
        return self._made[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._made[name] = command
        if name not in self._order:
            self._order.append(name)

    def __delitem__(self, name: str) -> None:
        del self._made[name]
        self._order.remove(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)

    def __contains__(self, name: object) -> bool:
        return name in self._order


class LazyGroup(TyperGroup):
    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _Commands(self.commands)


app = typer.Typer(
    name="kubetrain",
    help="Run Kubeflow training jobs (PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob, MXJob, "
    "MPIJob) on Kubernetes or on this machine.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    cls=LazyGroup,
)


@app.callback()
def main() -> None:
    """kubetrain: Kubeflow training jobs on Kubernetes or on this machine."""
    # A crash in a C extension (the decoders, the TLS stack) then leaves each thread's Python stack on stderr,
    # in the operator's and the dashboard's logs, instead of a bare exit by signal.
    with contextlib.suppress(ValueError, OSError):  # stderr without a file descriptor (captured in tests)
        faulthandler.enable()


@app.command()
def version() -> None:
    """Print kubetrain's version.

    Example: kubetrain version
    """
    typer.echo(__version__)
