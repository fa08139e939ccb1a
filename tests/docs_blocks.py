"""The commands of the documentation, as the docs tests run them.

A page shows commands in two kinds of fenced block:

- ```sh: a script, run as written (``bash -euo pipefail``); it must exit 0.
- ```console: one ``$ command`` line followed by its output, verbatim; the command must exit 0 and print
  exactly that output. ``make docs`` rewrites these outputs from the current code (run this module with
  the pages as arguments), so a change to, say, env injection fails the docs test until the page is
  regenerated and the diff reviewed.

Blocks can be taken from one ``## section`` of a page, so that one page's commands can run in the tier they
need (a local run in tests/local, a cluster in tests/cluster)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from waiting import PATIENCE

ROOT = Path(__file__).resolve().parents[1]
VENV_BIN = ROOT / ".venv" / "bin"
SH_BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.MULTILINE | re.DOTALL)
CONSOLE_BLOCK = re.compile(
    r"^```console\n\$ (?P<command>[^\n]*)\n(?P<output>.*?)^```$", re.MULTILINE | re.DOTALL
)
SECTION = re.compile(r"^## (.*)$", re.MULTILINE)


@dataclass(frozen=True)
class ConsoleBlock:
    command: str
    output: str


@dataclass(frozen=True)
class BlockRun:
    script: str
    returncode: int
    output: str


def section_text(page: Path, section: str | None = None) -> str:
    """The page's text, or the text under one ``## section`` heading (up to the next)."""
    text = page.read_text()
    if section is None:
        return text
    parts = SECTION.split(text)
    titles = parts[1::2]
    if section not in titles:
        raise ValueError(f"{page}: no section '## {section}' (sections: {titles})")
    return str(parts[2 + 2 * titles.index(section)])


def sh_blocks(page: Path, section: str | None = None) -> list[str]:
    return SH_BLOCK.findall(section_text(page, section))


def console_blocks(page: Path, section: str | None = None) -> list[ConsoleBlock]:
    return [
        ConsoleBlock(match["command"], match["output"])
        for match in CONSOLE_BLOCK.finditer(section_text(page, section))
    ]


def sections(page: Path) -> list[str]:
    return SECTION.findall(page.read_text())


def docs_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a reader has after installing: kubetrain (the dev venv) on PATH, a scratch HOME.
    The real cache directory stays, so envtest's built binaries and downloaded wheels are found."""
    real_cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    env = {
        **os.environ,
        "HOME": str(home),
        "PATH": os.pathsep.join([str(VENV_BIN), os.environ["PATH"]]),
        "XDG_CACHE_HOME": real_cache,
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "COLUMNS": "100",
        **(extra or {}),
    }
    env.pop("VIRTUAL_ENV", None)
    return env


STOP_GRACE_SECONDS = 15.0
"""What a script that outran its time gets between SIGTERM and SIGKILL: a ``kubetrain run`` in it stops its
replicas on SIGTERM, and a SIGKILL would leave them running."""


def run_script(script: str, env: Mapping[str, str], cwd: Path = ROOT, timeout: float = 600) -> BlockRun:
    """Runs ``script``; one still running after ``timeout`` seconds is stopped, every process it started
    with it, and its run says so after what it printed (keep ``timeout`` below pytest-timeout's, or the
    output is lost)."""
    with subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    ) as process:
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            output = _stop_group(process) + f"\n[docs test: still running after {timeout:g} s, stopped]"
    return BlockRun(script, process.returncode, output)


def _stop_group(process: subprocess.Popen[str]) -> str:
    os.killpg(process.pid, signal.SIGTERM)
    try:
        output, _ = process.communicate(timeout=STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
    return output


def console_output(block: ConsoleBlock, env: Mapping[str, str]) -> BlockRun:
    """Runs the block's command; the output is stdout alone, as the page shows it."""
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block.command],
        cwd=ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        check=False,
    )
    output = result.stdout if result.returncode == 0 else result.stdout + result.stderr
    return BlockRun(block.command, result.returncode, output)


def regenerate(page: Path, env: Mapping[str, str]) -> bool:
    """Rewrites every console block's output from its command; True when the page changed."""
    text = page.read_text()

    def rerun(match: re.Match[str]) -> str:
        run = console_output(ConsoleBlock(match["command"], match["output"]), env)
        if run.returncode != 0:
            raise SystemExit(f"{page}: `{run.script}` exited {run.returncode}:\n{run.output}")
        return f"```console\n$ {match['command']}\n{run.output}```"

    updated = CONSOLE_BLOCK.sub(rerun, text)
    page.write_text(updated)
    return updated != text


if __name__ == "__main__":
    env = docs_env(Path.home())
    for name in sys.argv[1:]:
        if regenerate(Path(name), env):
            print(f"updated {name}")


QUICKSTART_LOCAL = "Run a job on this machine"
QUICKSTART_CLUSTER = "Run it on a cluster"
QUICKSTART_SDK = "Drive it from Python"
QUICKSTART_CONTAINERS = "Run it in containers"
OPERATIONS_ON_A_CLUSTER = ("Metrics and health", "Upgrading")
API_ON_A_CLUSTER = ("Installing the CRDs",)
PROGRESS_ON_ONE_MACHINE = ("On one machine", "Hang detection")
TRAINJOB_ON_ONE_MACHINE = "On one machine"
SECTIONS_RUN = {
    "trainjob.md": (TRAINJOB_ON_ONE_MACHINE,),
    "api.md": API_ON_A_CLUSTER,
    "quickstart.md": (QUICKSTART_LOCAL, QUICKSTART_CONTAINERS, QUICKSTART_CLUSTER),
    "operations.md": OPERATIONS_ON_A_CLUSTER,
    "progress.md": PROGRESS_ON_ONE_MACHINE,
}
"""The sections whose ```sh blocks the local, containers and cluster tiers run; a unit test checks no block
of these pages lies outside them (console blocks are all checked in the unit tier)."""
