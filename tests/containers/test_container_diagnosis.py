"""``kubetrain run --runtime podman|docker`` diagnoses what the container runtime shows: an image that cannot
be had (the replica waits, Pending, and starts once the image is there, as a pod does) and a container killed
for running out of memory under its limit. Each is a Warning once, naming the pod and the cause, and shown
first by ``kubetrain describe --local``."""

from __future__ import annotations

import secrets
import signal
from pathlib import Path

import pytest

from builders import cli_runner
from containers.container_env import PYTHON_IMAGE, containers_of, engine
from containers.test_container_runs import python_job, start
from kubetrain.cli.main import app
from local.local_run import REPO, kubetrain_run, wait_for_findings, write_manifest
from waiting import PATIENCE

pytestmark = [pytest.mark.containers, pytest.mark.slow]


def describe(state_dir: Path, name: str) -> list[str]:
    result = cli_runner().invoke(
        app, ["describe", "pytorchjob", name, "--local", "--state-dir", str(state_dir)]
    )
    assert result.exit_code == 0, result.output
    return str(result.stdout).splitlines()


def test_a_missing_image_leaves_its_replica_pending_with_a_warning_until_the_image_is_there(
    tmp_path: Path, state_dir: Path, runtime: str
) -> None:
    image = f"localhost/kubetrain/absent-{secrets.token_hex(3)}:1"
    manifest = python_job("no-image", {"Master": (1, "print('ran in the image loaded late')")})
    container = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    container.update(image=image, imagePullPolicy="Never")
    runner = start(write_manifest(tmp_path, manifest), state_dir, runtime)
    try:
        [finding] = wait_for_findings(state_dir / "no-image" / "status.json")
        text = describe(state_dir, "no-image")
        pending = containers_of("no-image", runtime)
        tagged = engine(runtime, "tag", PYTHON_IMAGE, image)
        assert tagged.returncode == 0, tagged.stderr
        stdout, stderr = runner.communicate(timeout=180)
    finally:
        if runner.poll() is None:
            runner.send_signal(signal.SIGTERM)
            runner.communicate(timeout=PATIENCE)
        engine(runtime, "rmi", image)

    assert finding == {
        "reason": "ImagePullFailed",
        "message": f"pod no-image-master-0 cannot start: image {image} of container pytorch cannot be pulled "
        f'(ErrImageNeverPull: Container image "{image}" is not present with pull policy of Never). Fix: '
        "correct the image's name or tag, make its registry reachable from the nodes (imagePullSecrets for a "
        "private one), or, with imagePullPolicy Never, load it onto the nodes",
        "replicas": ["no-image-master-0"],
    }
    assert text[:2] == ["Diagnosis:", f"  ImagePullFailed: {finding['message']}"]
    assert pending == [], "nothing runs while the image is missing"
    assert stderr.count("Warning ImagePullFailed: ") == 1, stderr
    assert runner.returncode == 0, stderr
    assert "ran in the image loaded late" in stdout


def test_a_container_killed_for_memory_under_its_limit_is_an_out_of_memory_warning_naming_the_limit(
    tmp_path: Path, state_dir: Path, runtime: str
) -> None:
    manifest = python_job("oom", {"Master": (1, "x = bytearray(512 * 1024 * 1024)")})
    container = manifest["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"memory": "64Mi"}}

    run = kubetrain_run(write_manifest(tmp_path, manifest), state_dir, extra=("--runtime", runtime))

    expected = (
        "pod oom-master-0: container pytorch was killed for running out of memory (OOMKilled, exit code 137) "
        "under its memory limit of 64Mi. Fix: raise container pytorch's memory limit "
        "(spec.pytorchReplicaSpecs.Master.template.spec.containers[0].resources.limits.memory) or make it "
        "use less (a smaller batch)"
    )
    assert run.returncode == 1, run.stderr
    assert run.replica("master-0")["exit_codes"] == [137]
    assert f"Warning OutOfMemory: {expected}" in run.stderr
    assert describe(state_dir, "oom")[:2] == ["Diagnosis:", f"  OutOfMemory: {expected}"]
    # conmon drops a file named oom into its working directory on such a kill: the run's, not the user's.
    assert not (REPO / "oom").exists()
