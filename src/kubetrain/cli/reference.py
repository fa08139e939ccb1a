"""``docs/cli.md``: the job commands' reference, generated from their help so it cannot drift from them.

Regenerate with ``python -m kubetrain.cli.reference > docs/cli.md`` (``make docs``); a unit test fails
when the file is stale.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

from typer.main import get_command

from kubetrain.cli.main import app

JOB_COMMANDS = ("submit", "get", "describe", "logs", "wait", "delete", "suspend", "resume", "scale")
FILE_COMMANDS = ("migrate",)
"""Commands that only read and write manifest files."""

HEADER = """# kubetrain CLI reference: the job commands

Generated from the commands' `--help` by `python -m kubetrain.cli.reference` (`make docs`); do not edit by
hand. Every command acts on the cluster of the current kubeconfig context, or with `--local` on the jobs run
on this machine (`kubetrain run`, `kubetrain submit --local`, `TrainingClient(backend="local")`).

`kubetrain migrate` (last) reads v1 job manifests and writes Kubeflow Trainer v2 TrainJobs: it needs no
cluster.

Conventions, as in kubectl: `-n/--namespace` (default: the context's namespace, else `default`),
`-A/--all-namespaces`, `-o/--output`, `-l/--selector`, `-w/--watch`, `-f/--follow`, `--kubeconfig`,
`--context`. `KIND` accepts any case and the plural, with or without the group: `pytorchjob`,
`pytorchjobs`, `PyTorchJob`, `pytorchjob.kubeflow.org`, and the short names `pytorch`, `tf`, `xgboost`,
`paddle`, `jax`, `mx`, `mpi` (the v2beta1 MPIJob is `mpijob-v2beta1` or `mpijobs.kubeflow.org/v2beta1`).
Kubeflow Trainer's TrainJob is `trainjob`, `trainjobs` or `trainjob.trainer.kubeflow.org`: every command
below takes TrainJobs too (locally, a TrainJob's run), with Trainer's states (`Complete`, not `Succeeded`)
and its nodes as replicas (`node-0`, `node-1`).
A job may be named `KIND NAME`, `KIND/NAME` or just `NAME` when no other kind has a job of that name.

Exit status: 0 success; 1 the job failed, or the request did (not found, forbidden, no cluster, timed
out), with one `error: ...` line on stderr; 2 bad usage or an invalid manifest (each problem named by its
field path). Output for machines (`-o yaml|json|name`) goes to stdout, errors to stderr; `NO_COLOR` turns
colour off. Shell completion: `kubetrain --install-completion`.
"""


def _option_row(param: Any) -> str:
    names = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
    help_text = _cell(getattr(param, "help", None) or "")
    default = None if getattr(param, "is_flag", False) else param.default
    if default not in (None, False, (), []):
        shown = getattr(default, "value", default)
        help_text += f" Default: `{shown}`."
    if getattr(param, "required", False):
        help_text += " Required."
    return f"| {names} | {help_text.strip()} |"


def _cell(text: str) -> str:
    """Help text safe inside a Markdown table cell (``|`` splits cells, ``<type>`` would read as HTML)."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _metavar(argument: Any) -> str:
    if argument.metavar:
        return str(argument.metavar)
    name = str(argument.name).upper()
    return name if argument.required else f"[{name}]"


def command_reference(name: str) -> str:
    group = get_command(app)
    command = group.commands[name]  # type: ignore[attr-defined]
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    options = [p for p in command.params if p.param_type_name == "option" and not p.hidden]
    usage = " ".join(["kubetrain", name, "[OPTIONS]", *(_metavar(p) for p in arguments)])
    lines = [f"## kubetrain {name}", "", "```", usage, "```", "", inspect.cleandoc(command.help or ""), ""]
    if arguments:
        lines += ["| Argument | Description |", "|---|---|"]
        lines += [f"| `{_metavar(p)}` | {_cell(getattr(p, 'help', '') or '')} |" for p in arguments]
        lines.append("")
    if options:
        lines += ["| Option | Description |", "|---|---|", *(_option_row(p) for p in options), ""]
    return "\n".join(lines)


def render() -> str:
    return HEADER + "\n" + "\n".join(command_reference(name) for name in (*JOB_COMMANDS, *FILE_COMMANDS))


if __name__ == "__main__":
    sys.stdout.write(render())
