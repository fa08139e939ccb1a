"""The real node's image cache: images are unpacked into containerd once per recipe, not once per node start.

Importing an image into containerd means `podman save`, copying every layer into the content store and
unpacking it into overlay snapshots: minutes for the 4.4 GB PyTorch image, and each real node starts with
an empty containerd. So the images live in a containerd root of their own in the user's cache
(``~/.cache/kubetrain/node-images/containerd``: content blobs, overlay snapshots and containerd's metadata),
into which only a short-lived containerd with no CRI imports images (``tools/images/build.py
--load-containerd``, skipped when the image there carries the current recipe label, so a changed recipe
re-imports and containerd's garbage collection drops the old layers). It never runs a container.

A starting node's containerd root is a clone of that root made of hard links (same filesystem: seconds for
gigabytes), except for the two bolt databases, which containerd writes in place and so are copied. Content
blobs and committed snapshot directories are never written after they are made (overlayfs copies a file
up before changing it), so the node's containers cannot change the cache, and what the node adds or
removes (containers, sandboxes, active snapshots, a garbage-collected image) only ever touches the run
directory's own directory entries. Per-run state stays in the run directory and goes with it on stop.

Clear the cache with ``rm -rf ~/.cache/kubetrain/node-images`` while no node is starting.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from kubetrain.envtest import binaries

CHECKOUT = Path(__file__).resolve().parents[3]
# The files containerd keeps open with mmap and writes in place: copied, never linked, into a node.
BOLT_DATABASES = (
    Path("io.containerd.metadata.v1.bolt") / "meta.db",
    Path("io.containerd.snapshotter.v1.overlayfs") / "metadata.db",
)
SOCKET_DIR = Path("/run/kubetrain/image-cache")


class ImageCacheError(RuntimeError):
    """The cache's containerd did not start or an import failed; the message says why."""


def cache_dir() -> Path:
    override = os.environ.get("KUBETRAIN_NODE_IMAGE_CACHE")
    return Path(override) if override else binaries.cache_root().parent / "node-images"


def containerd_root() -> Path:
    return cache_dir() / "containerd"


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    """One writer or cloner at a time (several engineers' nodes and test runs share the cache): a clone
    taken while the cache's containerd writes would copy a half-written database."""
    cache_dir().mkdir(parents=True, exist_ok=True)
    with (cache_dir() / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _containerd_config(socket: Path, state: Path) -> str:
    return "\n".join(
        [
            "version = 2",
            f'root = "{containerd_root()}"',
            f'state = "{state}"',
            # Only the content store, the snapshotter and the image service are needed to import.
            'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
            "[grpc]",
            f'  address = "{socket}"',
            '[plugins."io.containerd.internal.v1.opt"]',
            f'  path = "{state / "opt"}"',
            "",
        ]
    )


def _ctr_version(socket: Path) -> bool:
    done = subprocess.run(
        ["ctr", "--address", str(socket), "version"], capture_output=True, text=True, check=False
    )
    return done.returncode == 0


def update(names: list[str], log: Callable[[str], None] = lambda _: None) -> None:
    """Bring the named images of tools/images into the cache (each built first when its recipe changed);
    an image already there with its current recipe costs nothing but the label check."""
    # Built before taking the lock: a build takes minutes, and others' nodes would wait for it to clone.
    _build_py(names, log)
    with _locked():
        _update_locked(names, log)


def _build_py(names: list[str], log: Callable[[str], None], *options: str) -> None:
    command = [sys.executable, str(CHECKOUT / "tools" / "images" / "build.py"), *options, *names]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    for line in done.stdout.splitlines():
        log(f"image cache: {line}")
    if done.returncode != 0:
        raise ImageCacheError(f"`{' '.join(command)}` failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")


def _update_locked(names: list[str], log: Callable[[str], None]) -> None:
    SOCKET_DIR.mkdir(parents=True, exist_ok=True)
    state = SOCKET_DIR / "state"
    socket = SOCKET_DIR / "containerd.sock"
    shutil.rmtree(state, ignore_errors=True)
    state.mkdir(parents=True)
    containerd_root().mkdir(parents=True, exist_ok=True)
    config = SOCKET_DIR / "containerd.toml"
    config.write_text(_containerd_config(socket, state))
    with (cache_dir() / "containerd.log").open("ab") as output:
        process = subprocess.Popen(
            ["containerd", "--config", str(config)], stdout=output, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 30
        while not _ctr_version(socket):
            if process.poll() is not None or time.monotonic() > deadline:
                raise ImageCacheError(f"the image cache's containerd did not start; see {output.name}")
            time.sleep(0.1)
        _build_py(names, log, "--load-containerd", str(socket))
    finally:
        # SIGTERM: containerd closes its databases; the cache is only cloned while this lock is held.
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        # Its config and the sockets a stopped containerd leaves: nothing of the cache's stays in /run, and
        # /run/kubetrain goes too when no node's socket directory is in it.
        shutil.rmtree(SOCKET_DIR, ignore_errors=True)
        with contextlib.suppress(OSError):
            SOCKET_DIR.parent.rmdir()


def clone_into(root: Path) -> None:
    """Make ``root`` (a node's containerd root, not there yet) a copy of the cache: hard links for the
    content and snapshots, copies of the bolt databases. Nothing when the cache is empty, or when a
    node already ran in this run directory (``root`` exists: it keeps what it has)."""
    with _locked():
        source = containerd_root()
        if not (source / BOLT_DATABASES[0]).is_file() or root.exists():
            return
        root.parent.mkdir(parents=True, exist_ok=True)
        # cp keeps what overlayfs needs: whiteout devices, the opaque-directory xattrs, owners and modes.
        done = subprocess.run(
            ["cp", "-a", "--link", str(source), str(root)], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise ImageCacheError(f"cloning the image cache into {root}: {done.stderr.strip()}")
        for database in BOLT_DATABASES:
            linked = root / database
            if linked.exists():
                linked.unlink()
                shutil.copy2(source / database, linked)


if __name__ == "__main__":  # `make test-e2e`: every image the tier runs, before its node starts and clones
    from kubetrain.envtest import realnode

    # Where no node can run, the tier is skipped with the reasons; nothing to cache for it.
    if not realnode.cannot_run_reasons():
        update(sys.argv[1:], print)
