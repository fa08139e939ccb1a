"""Kubeflow Trainer v2.3's own status script (tests/upstream/trainer/status_update.py): the copy is upstream's
byte for byte, and the endpoint takes what it sends, with only the three variables it reads."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import sys
from pathlib import Path

import pytest

from kubetrain.api.progress import StatusRoute, StatusRoutes, StatusTarget, TrainerStatus
from kubetrain.progress import credentials
from kubetrain.progress.server import RefusedError, Reporter, serve, status_application
from waiting import PATIENCE

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "tests" / "upstream" / "trainer" / "status_update.py"
ORIGIN = SCRIPT.parent / "README.md"
MODULE_FILE = Path("github.com/kubeflow/trainer/v2@v2.3.0/test/e2e/testdata/status_update.py")
TARGET = StatusTarget("kubeflow.org/v1", "team-a", "pytorchjobs", "bert")


def recorded_digest() -> str:
    found = re.search(r"\| sha256 \| `([0-9a-f]{64})` \|", ORIGIN.read_text())
    assert found, "tests/upstream/trainer/README.md records the copy's sha256"
    return found[1]


def test_the_copy_is_the_one_whose_digest_its_readme_records() -> None:
    assert hashlib.sha256(SCRIPT.read_bytes()).hexdigest() == recorded_digest()


def test_the_copy_keeps_upstreams_licence_header() -> None:
    header = SCRIPT.read_text().splitlines()[:4]
    assert header == [
        "# Copyright The Kubeflow Authors.",
        "#",
        '# Licensed under the Apache License, Version 2.0 (the "License");',
        "# you may not use this file except in compliance with the License.",
    ]


def test_the_copy_is_byte_for_byte_the_modules_file_where_the_module_cache_has_it() -> None:
    cache = Path(os.environ.get("GOMODCACHE") or Path.home() / "go" / "pkg" / "mod")
    if not (cache / MODULE_FILE).exists():
        pytest.skip(f"{cache / MODULE_FILE} is not downloaded here (the digest test still holds the copy)")
    assert (cache / MODULE_FILE).read_bytes() == SCRIPT.read_bytes()


class OneToken:
    async def authenticate(self, token: str, target: StatusTarget) -> Reporter:
        if token != "the-token" or target != TARGET:
            raise RefusedError(403, "not this job's token")
        return Reporter("bert-master-0")


class Kept:
    def __init__(self) -> None:
        self.reports: list[TrainerStatus] = []

    def accept(self, target: StatusTarget, status: TrainerStatus, reporter: Reporter) -> None:
        self.reports.append(status)


async def test_the_script_unchanged_is_answered_200_and_its_report_kept(tmp_path: Path) -> None:
    tls = credentials.issue(["127.0.0.1"])
    kept = Kept()
    routes = StatusRoutes([StatusRoute.of("kubeflow.org/v1", "pytorchjobs")])
    runner = await serve(status_application(routes, OneToken(), kept), "127.0.0.1", 0, tls.server_context())
    (tmp_path / "ca.crt").write_text(tls.ca_cert)
    (tmp_path / "token").write_text("the-token\n")
    env = {
        "PATH": os.environ.get("PATH", ""),
        "KUBEFLOW_TRAINER_SERVER_URL": f"https://127.0.0.1:{runner.addresses[0][1]}{TARGET.path}",
        "KUBEFLOW_TRAINER_SERVER_CA_CERT": str(tmp_path / "ca.crt"),
        "KUBEFLOW_TRAINER_SERVER_TOKEN": str(tmp_path / "token"),
    }
    try:
        script = await asyncio.create_subprocess_exec(
            sys.executable,
            str(SCRIPT),
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(script.communicate(), PATIENCE)
    finally:
        await runner.cleanup()
    assert script.returncode == 0, stderr.decode()
    assert stdout.decode().startswith("Success updating trainer status: 200 ")
    [report] = kept.reports
    assert (report.progress_percentage, report.estimated_remaining_seconds) == (42, 120)
    assert [(m.name, m.value) for m in report.metrics or []] == [("loss", "0.123"), ("accuracy", "0.95")]
