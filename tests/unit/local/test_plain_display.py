"""Without a terminal, replica lines go to stdout behind a padded prefix and notes to stderr."""

from __future__ import annotations

import io
import time

from kubetrain.local.display import PlainDisplay, Snapshot
from kubetrain.local.state import ReplicaRecord


def display(quiet: bool = False) -> tuple[PlainDisplay, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    return PlainDisplay(["master-0", "worker-10"], quiet=quiet, out=out, err=err), out, err


def snapshot(phase: str) -> Snapshot:
    replica = ReplicaRecord("master-0", "Master", 0, 42, phase, 0, None, [], "m.log")
    return Snapshot("ddp", "PyTorchJob", (), (replica,), time.time())


def test_a_replica_line_is_prefixed_with_its_name_padded_to_the_longest() -> None:
    shown, out, _ = display()
    shown.line("master-0", "step 1 loss 0.5")
    assert out.getvalue() == "master-0  | step 1 loss 0.5\n"


def test_runner_notes_go_to_stderr_not_stdout() -> None:
    shown, out, err = display()
    shown.note("image ignored")
    assert (out.getvalue(), err.getvalue()) == ("", "kubetrain: image ignored\n")


def test_a_replica_phase_change_is_reported_once() -> None:
    shown, _, err = display()
    shown.status(snapshot("Running"))
    shown.status(snapshot("Running"))
    assert err.getvalue().count("master-0 Running") == 1


def test_quiet_shows_replica_lines_only() -> None:
    shown, out, err = display(quiet=True)
    shown.line("master-0", "hello")
    shown.note("a note")
    shown.status(snapshot("Running"))
    shown.finish(snapshot("Succeeded"))
    assert (out.getvalue(), err.getvalue()) == ("master-0  | hello\n", "")
