"""The CLI imports only what the command it runs uses: `kubetrain version` must not pay for the operator, its
HTTP stack or the job models, nor `get --local` for the cluster client (bench/cli_latency.py times them)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CLUSTER_STACK = ["aiohttp", "lightkube", "httpx2", "kubetrain.kube.operator", "kubetrain.kube.runtime.http"]


def modules_after(arguments: list[str] | None, tmp_path: Path) -> set[str]:
    """The modules a fresh interpreter has loaded after importing the CLI and, unless None, running
    ``kubetrain <arguments>``."""
    program = "import json, sys\nfrom kubetrain.cli.main import app\n"
    if arguments is not None:
        program += (
            f"sys.argv = ['kubetrain', *{arguments!r}]\ntry:\n    app()\nexcept SystemExit:\n    pass\n"
        )
    program += "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    env = {"KUBETRAIN_STATE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, env=env, check=True
    )
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def test_importing_the_cli_imports_no_command_module(tmp_path: Path) -> None:
    loaded = modules_after(None, tmp_path)
    assert not {name for name in loaded if name.startswith("kubetrain.cli.") and name != "kubetrain.cli.main"}


def test_version_imports_neither_the_cluster_stack_nor_the_job_models(tmp_path: Path) -> None:
    loaded = modules_after(["version"], tmp_path)
    assert loaded.isdisjoint([*CLUSTER_STACK, "kubetrain.api.jobs", "kubetrain.sdk"])


def test_get_local_imports_no_cluster_stack(tmp_path: Path) -> None:
    loaded = modules_after(["get", "--local"], tmp_path)
    assert "kubetrain.cli.get" in loaded
    assert loaded.isdisjoint(CLUSTER_STACK)


def test_get_local_imports_neither_the_container_runtime_nor_the_key_generator(tmp_path: Path) -> None:
    loaded = modules_after(["get", "--local"], tmp_path)
    assert loaded.isdisjoint(["kubetrain.local.containers", "cryptography"])


def test_get_local_lists_runs_without_the_job_models(tmp_path: Path) -> None:
    from kubetrain.local.state import RunDirectory, RunRecord

    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "ddp"}, "spec": {}}
    RunDirectory(tmp_path, "ddp").write(
        RunRecord(job, [], runner_pid=1, runner_started_at=0.0, finished=True)
    )
    loaded = modules_after(["get", "--local"], tmp_path)
    assert "kubetrain.api.summary" in loaded
    assert loaded.isdisjoint(["pydantic", "kubetrain.api.jobs", "kubetrain.sdk.client"])


def test_plan_shows_the_status_endpoints_variables_without_importing_what_serves_them(tmp_path: Path) -> None:
    manifest = str(Path(__file__).resolve().parents[3] / "examples" / "pytorch-ddp" / "job.yaml")
    loaded = modules_after(["plan", manifest, "-t", "local"], tmp_path)
    assert "kubetrain.local.status_access" in loaded
    assert loaded.isdisjoint(["kubetrain.local.status_endpoint", "aiohttp", "cryptography"])
