"""Build kubetrain's container images into podman's storage, without a registry, once per recipe.

No container registry is reachable from this machine, so every image starts from a Debian root filesystem
made here by mmdebstrap (``python``) or from ``scratch`` (``pause``); the rest are Containerfiles
``FROM localhost/kubetrain/python``. Each image is named ``localhost/kubetrain/<name>:<tag>`` and labelled
``dev.kubetrain.recipe`` with a hash of its inputs (its Containerfile, the context files it copies, its
pinned versions and its bases' hashes): a build whose label already matches is skipped, so a second run
costs seconds. ``--load-containerd SOCKET`` then imports each image into that containerd's ``k8s.io``
namespace (what a kubelet uses), also skipped when the image there carries the same recipe label.

Usage: python tools/images/build.py [--load-containerd SOCKET] NAME [NAME...]   (``make images``)
       python tools/images/build.py --list   (every name, its reference and its bases)
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REGISTRY = "localhost/kubetrain"
RECIPE_LABEL = "dev.kubetrain.recipe"
KUBETRAIN_VERSION_FILE = ROOT / "src" / "kubetrain" / "__init__.py"

# What the Debian base holds: python3 (3.11 in bookworm, as kubetrain needs), venv for the images' own
# virtual environments, `python` on PATH (the example manifests run `python ...`), and the CA bundle.
DEBIAN_SUITE = "bookworm"
DEBIAN_PACKAGES = ("python3", "python3-venv", "python-is-python3", "ca-certificates")
# Docs, man pages, locales and info pages are of no use in a container: dpkg never unpacks them.
DPKG_EXCLUDES = ("/usr/share/man/*", "/usr/share/doc/*", "/usr/share/locale/*", "/usr/share/info/*")

# The images' pinned versions: each is a build argument of its Containerfile and part of its tag.
PIP_VERSION = "26.3"  # the host venv's pip
TORCH_VERSION = "2.13.0"
TENSORFLOW_VERSION = "2.21.0"
XGBOOST_VERSION = "3.2.0"
JAX_VERSION = "0.10.2"
MPI4PY_VERSION = "4.1.2"
PAUSE_VERSION = "3.10"
BUSYBOX_VERSION = "1.35"  # Debian bookworm's busybox

# The machine's limits are lower than podman's default ulimits ("error setting rlimit type 7"), and crun
# cannot create containers under this machine's hybrid cgroup v1 layout; runc can.
PODMAN_RUN_FLAGS = ("--runtime", "runc", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096")
# Builds reach PyPI and Debian through this machine's TLS setup: the host's CA bundle is mounted for the
# build only (the image keeps Debian's own).
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
# Wheels are downloaded once into this directory, mounted at /wheels, and installed from it
# (`pip download --dest /wheels` skips files already there). pip's own HTTP cache stays empty here: the
# machine's proxy answers PyPI's downloads uncacheable.
WHEELHOUSE = Path(
    os.environ.get("KUBETRAIN_WHEELHOUSE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kubetrain" / "wheels"
)

# A machine may carry wheels of its own where pip looks first (PIP_FIND_LINKS: some carry a CPU build of
# torch, a tenth of the CUDA one and its nvidia-* libraries). Builds see the same directories, read-only,
# so an image gets what the host's venv got.
FIND_LINKS_MOUNT = "/find-links"

# `make test` builds images in one lane while another may need one of them (the cluster tier the operator's):
# one build per image at a time; the one that waited finds the recipe label current.
LOCK_DIR = WHEELHOUSE.parent / "image-locks"


def host_find_links() -> list[Path]:
    """The existing directories named in the host's ``PIP_FIND_LINKS`` (URLs are left to pip's network)."""
    named = os.environ.get("PIP_FIND_LINKS", "").split()
    return [Path(entry) for entry in named if "://" not in entry and Path(entry).is_dir()]


def find_links_volumes() -> list[str]:
    """``--volume`` flags giving the build the host's find-links directories and a pip.conf naming them:
    a mounted config rather than a build argument, so the Containerfiles and their layers stay the same
    on machines without such wheels."""
    directories = host_find_links()
    if not directories:
        return []
    mounts = [f"{FIND_LINKS_MOUNT}/{index}" for index in range(len(directories))]
    config = WHEELHOUSE.parent / "find-links-pip.conf"
    config.write_text("[global]\nfind-links =\n" + "".join(f"    {mount}\n" for mount in mounts))
    volumes = ["--volume", f"{config}:/etc/pip.conf:ro"]
    for mount, directory in zip(mounts, directories, strict=True):
        volumes += ["--volume", f"{directory}:{mount}:ro"]
    return volumes


def _find_links_files() -> list[str]:
    return sorted(f"{d}/{f.name}" for d in host_find_links() for f in d.iterdir() if f.is_file())


@dataclass(frozen=True)
class Recipe:
    """How one image is built. ``containerfile`` is relative to the repo root; None means the Debian
    root filesystem made by mmdebstrap. ``context`` is the build context directory and ``inputs`` the
    files under it the build copies (what the recipe hash covers besides the Containerfile)."""

    name: str
    tag: str
    containerfile: str | None
    bases: tuple[str, ...] = ()
    context: str = "."
    inputs: tuple[str, ...] = ()
    build_args: dict[str, str] = field(default_factory=dict)
    pip_cache: bool = False

    @property
    def reference(self) -> str:
        return f"{REGISTRY}/{self.name}:{self.tag}"


def kubetrain_version() -> str:
    """The package's version, as `kubetrain version` prints it, read without importing kubetrain (the
    script runs under any python3)."""
    for line in KUBETRAIN_VERSION_FILE.read_text().splitlines():
        if line.startswith("__version__ = "):
            return line.split("=", 1)[1].strip().strip("\"'")
    raise SystemExit(f"{KUBETRAIN_VERSION_FILE}: no __version__ line")


"""What the PyTorch image copies in; the other framework images copy their own example only, so that
editing one example does not rebuild (and re-import into the node) every multi-GB image."""
RECIPES: dict[str, Recipe] = {
    recipe.name: recipe
    for recipe in (
        Recipe("python", f"3.11-{DEBIAN_SUITE}", None),
        Recipe(
            "pause",
            PAUSE_VERSION,
            "images/pause/Containerfile",
            bases=("python",),
            context="images/pause",
            inputs=("pause.c",),
            build_args={"PAUSE_VERSION": PAUSE_VERSION},
        ),
        Recipe(
            "busybox",
            BUSYBOX_VERSION,
            "images/busybox/Containerfile",
            bases=("python",),
            context="images/busybox",
            inputs=("nslookup",),
        ),
        Recipe(
            "operator",
            kubetrain_version(),
            "Containerfile",
            bases=("python",),
            inputs=("pyproject.toml", "README.md", "LICENSE", "src", ".containerignore"),
            build_args={"PIP_VERSION": PIP_VERSION, "KUBETRAIN_VERSION": kubetrain_version()},
            pip_cache=True,
        ),
        Recipe(
            "pytorch",
            TORCH_VERSION,
            "images/pytorch/Containerfile",
            bases=("python",),
            inputs=("examples/pytorch-ddp", "examples/pytorch-elastic", "src/kubetrain/reporting.py"),
            build_args={"PIP_VERSION": PIP_VERSION, "TORCH_VERSION": TORCH_VERSION},
            pip_cache=True,
        ),
        Recipe(
            "tensorflow",
            TENSORFLOW_VERSION,
            "images/tensorflow/Containerfile",
            bases=("python",),
            inputs=("examples/tensorflow",),
            build_args={"PIP_VERSION": PIP_VERSION, "TENSORFLOW_VERSION": TENSORFLOW_VERSION},
            pip_cache=True,
        ),
        Recipe(
            "xgboost",
            XGBOOST_VERSION,
            "images/xgboost/Containerfile",
            bases=("python",),
            inputs=("examples/xgboost", "src/kubetrain/reporting.py"),
            build_args={"PIP_VERSION": PIP_VERSION, "XGBOOST_VERSION": XGBOOST_VERSION},
            pip_cache=True,
        ),
        Recipe(
            "jax",
            JAX_VERSION,
            "images/jax/Containerfile",
            bases=("python",),
            inputs=("examples/jax",),
            build_args={"PIP_VERSION": PIP_VERSION, "JAX_VERSION": JAX_VERSION},
            pip_cache=True,
        ),
        # The Paddle example checks the PADDLE_* environment only: plain Python, no paddle wheel.
        Recipe(
            "paddle",
            "env-check",
            "images/paddle/Containerfile",
            bases=("python",),
            inputs=("examples/paddle",),
        ),
        Recipe(
            "mpi",
            f"openmpi-mpi4py{MPI4PY_VERSION}",
            "images/mpi/Containerfile",
            bases=("python",),
            inputs=("examples/mpi",),
            build_args={"PIP_VERSION": PIP_VERSION, "MPI4PY_VERSION": MPI4PY_VERSION},
            pip_cache=True,
        ),
    )
}


def mmdebstrap_command(output: Path) -> list[str]:
    command = ["mmdebstrap", "--variant=minbase", f"--include={','.join(DEBIAN_PACKAGES)}"]
    for pattern in DPKG_EXCLUDES:
        command.append(f"--dpkgopt=path-exclude={pattern}")
    # Licences stay: Debian asks that copyright files ship with the binaries.
    command += ["--dpkgopt=path-include=/usr/share/doc/*/copyright", '--aptopt=Acquire::Languages "none"']
    return [*command, DEBIAN_SUITE, str(output)]


def _input_files(recipe: Recipe) -> Iterator[Path]:
    context = ROOT / recipe.context
    for name in recipe.inputs:
        path = context / name
        if path.is_file():
            yield path
            continue
        for child in sorted(path.rglob("*")):
            # What .containerignore leaves out of the build context is no input either.
            ignored = any(part == "__pycache__" or part.endswith(".egg-info") for part in child.parts)
            if child.is_file() and not ignored and child.suffix != ".pyc":
                yield child


def recipe_hash(name: str) -> str:
    """A hash of everything the image is made from; equal hashes mean an equal image."""
    recipe = RECIPES[name]
    digest = hashlib.sha256()
    digest.update(f"{recipe.name}\0{recipe.tag}\0{sorted(recipe.build_args.items())}\0".encode())
    if recipe.containerfile is None:
        digest.update(" ".join(mmdebstrap_command(Path("-"))).encode())
    else:
        digest.update((ROOT / recipe.containerfile).read_bytes())
    for path in _input_files(recipe):
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    if recipe.pip_cache:
        # A wheel added to (or removed from) the host's find-links changes what pip would install.
        digest.update("\0".join(_find_links_files()).encode())
    for base in recipe.bases:
        digest.update(recipe_hash(base).encode())
    return digest.hexdigest()[:32]


def _run(command: Sequence[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, text=True, check=False, **kwargs)  # type: ignore[call-overload,no-any-return]


def image_label(reference: str) -> str | None:
    """The recipe label of an image in podman's storage, None when there is no such image."""
    done = _run(
        ["podman", "image", "inspect", "--format", f'{{{{index .Labels "{RECIPE_LABEL}"}}}}', reference],
        capture_output=True,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def image_size(reference: str) -> int:
    done = _run(["podman", "image", "inspect", "--format", "{{.Size}}", reference], capture_output=True)
    return int(done.stdout.strip()) if done.returncode == 0 else 0


def _check(done: subprocess.CompletedProcess[str], what: str) -> None:
    if done.returncode != 0:
        raise SystemExit(f"{what} failed (exit {done.returncode})")


def _build_rootfs(recipe: Recipe, digest: str) -> None:
    with tempfile.TemporaryDirectory(prefix="kubetrain-rootfs-") as scratch:
        tarball = Path(scratch) / "rootfs.tar"
        _check(_run(mmdebstrap_command(tarball)), "mmdebstrap")
        changes = [
            f"LABEL {RECIPE_LABEL}={digest}",
            "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "ENV LANG=C.UTF-8",
            'CMD ["python3"]',
        ]
        command = ["podman", "import"]
        for change in changes:
            command += ["--change", change]
        _check(_run([*command, str(tarball), recipe.reference], stdout=subprocess.DEVNULL), "podman import")


def _build_containerfile(recipe: Recipe, digest: str, rebuild: bool) -> None:
    assert recipe.containerfile is not None
    # The host's network: a build only downloads. Through podman's bridge, name resolution stopped working
    # here mid-session while the host's kept working (cause not found).
    command = [
        "podman",
        "build",
        *PODMAN_RUN_FLAGS,
        "--network",
        "host",
        "--file",
        str(ROOT / recipe.containerfile),
    ]
    command += ["--tag", recipe.reference, "--label", f"{RECIPE_LABEL}={digest}"]
    build_args = dict(recipe.build_args)
    if recipe.bases:
        build_args["BASE"] = RECIPES[recipe.bases[0]].reference
    for key, value in sorted(build_args.items()):
        command += ["--build-arg", f"{key}={value}"]
    if HOST_CA_BUNDLE.is_file():
        command += ["--volume", f"{HOST_CA_BUNDLE}:/etc/ssl/certs/ca-certificates.crt:ro"]
    if rebuild:
        command.append("--no-cache")  # podman would reuse its cached layers of the same steps
    if recipe.pip_cache:
        WHEELHOUSE.mkdir(parents=True, exist_ok=True)
        command += ["--volume", f"{WHEELHOUSE}:/wheels"]
        command += find_links_volumes()
    _check(_run([*command, str(ROOT / recipe.context)]), f"podman build of {recipe.reference}")


@contextlib.contextmanager
def _build_lock(name: str) -> Iterator[None]:
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    with (LOCK_DIR / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also when the build fails
        yield


def build(name: str, built: set[str] | None = None, rebuild: frozenset[str] = frozenset()) -> str:
    """Build one image and its bases, each unless its recipe label is current (or it is named in
    ``rebuild``); returns its reference."""
    built = set() if built is None else built
    recipe = RECIPES[name]
    for base in recipe.bases:
        if base not in built:
            build(base, built, rebuild)
    built.add(name)
    digest = recipe_hash(name)
    started = time.monotonic()
    with _build_lock(name):
        if name not in rebuild and image_label(recipe.reference) == digest:
            state = "up to date"
        else:
            print(f"building {recipe.reference} (recipe {digest})", file=sys.stderr, flush=True)
            if recipe.containerfile is None:
                _build_rootfs(recipe, digest)
            else:
                _build_containerfile(recipe, digest, name in rebuild)
            state = f"built in {time.monotonic() - started:.0f} s"
    size = image_size(recipe.reference)
    print(f"{recipe.reference}  {size / 1e6:.0f} MB  {state}", flush=True)
    return recipe.reference


def _ctr(socket: str, *args: str) -> list[str]:
    return ["ctr", "--address", socket, "--namespace", "k8s.io", *args]


def _containerd_image(socket: str, reference: str) -> list[str] | None:
    """The image's row of ``ctr images ls`` (ref, type, digest, size, platforms, labels), None when absent."""
    done = _run(_ctr(socket, "images", "ls", f"name=={reference}"), capture_output=True)
    _check(done, f"ctr images ls on {socket}")
    rows = (line.split() for line in done.stdout.splitlines()[1:])
    return next((fields for fields in rows if fields and fields[0] == reference), None)


def containerd_label(socket: str, reference: str) -> str | None:
    """The recipe label kubetrain put on an image in containerd, None when the image is not there."""
    fields = _containerd_image(socket, reference)
    if fields is None:
        return None
    labels = dict(item.split("=", 1) for item in fields[-1].split(",") if "=" in item)
    return labels.get(RECIPE_LABEL, "")


def discard_layer_blobs(socket: str, reference: str) -> None:
    """Delete an unpacked image's layer blobs from containerd's content store, keeping its manifest, config
    and snapshots, as the CRI's ``discard_unpacked_layers`` does for pulls: a container starts from the
    snapshots, and the blobs were a second copy of every image (6.7 GB of the node's image cache, which
    with the other copies filled a CI machine's disk). Collected at once (a lease deleted with ``--sync``
    runs the garbage collector), not at the next collection, which a short-lived containerd may not see."""
    image = _containerd_image(socket, reference)
    if image is None:
        raise SystemExit(f"{reference} is not in containerd {socket} after its import")
    manifest_digest = image[2]
    shown = _run(_ctr(socket, "content", "get", manifest_digest), capture_output=True)
    _check(shown, f"ctr content get {manifest_digest}")
    layers = [layer["digest"] for layer in json.loads(shown.stdout)["layers"]]
    _check(_run(_ctr(socket, "content", "rm", *layers), stdout=subprocess.DEVNULL), "ctr content rm")
    lease = _run(_ctr(socket, "leases", "create"), capture_output=True)
    _check(lease, "ctr leases create")
    collected = _run(
        _ctr(socket, "leases", "delete", "--sync", lease.stdout.split()[0]), stdout=subprocess.DEVNULL
    )
    _check(collected, "ctr leases delete --sync")


def import_into_containerd(reference: str, socket: str) -> None:
    """Import an image of podman's storage into containerd's k8s.io namespace, its layer blobs then dropped
    (the snapshots hold what containers need)."""
    with tempfile.TemporaryDirectory(prefix="kubetrain-image-") as scratch:
        layout = Path(scratch) / "image"
        # Uncompressed: gzip of a multi-GB layer on 2 cores took most of the time (pytorch: 515 s compressed).
        # An OCI directory streamed into ctr as a tar, not an oci-archive: podman stages each blob in
        # /var/tmp before adding it to an archive, so the archive needed twice the image's size on disk
        # (the PyTorch image's save failed with "no space left on device" where the directory fits).
        save = ["podman", "save", "--quiet", "--uncompressed", "--format", "oci-dir", "-o", str(layout)]
        saved = _run([*save, reference])
        _check(saved, f"podman save of {reference}")
        tar = subprocess.Popen(["tar", "-C", str(layout), "-cf", "-", "."], stdout=subprocess.PIPE)
        imported = _run(_ctr(socket, "images", "import", "-"), stdin=tar.stdout, stdout=subprocess.DEVNULL)
        assert tar.stdout is not None
        tar.stdout.close()
        _check(imported, "ctr import")
        if tar.wait() != 0:
            raise SystemExit(f"tar of {layout} failed (exit {tar.returncode})")
    discard_layer_blobs(socket, reference)


def load_into_containerd(name: str, socket: str) -> None:
    """Import an image built here into containerd's k8s.io namespace (where a kubelet looks), unless the
    image there already has the same recipe."""
    recipe = RECIPES[name]
    digest = image_label(recipe.reference)
    if digest is None:
        raise SystemExit(f"{recipe.reference} is not built; run: python tools/images/build.py {name}")
    if containerd_label(socket, recipe.reference) == digest:
        print(f"{recipe.reference}  already in containerd {socket}", flush=True)
        return
    started = time.monotonic()
    import_into_containerd(recipe.reference, socket)
    _check(
        _run(
            _ctr(socket, "images", "label", recipe.reference, f"{RECIPE_LABEL}={digest}"),
            stdout=subprocess.DEVNULL,
        ),
        "ctr images label",
    )
    print(
        f"{recipe.reference}  loaded into containerd {socket} in {time.monotonic() - started:.0f} s",
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"one of: {', '.join(RECIPES)}")
    parser.add_argument("--load-containerd", metavar="SOCKET", help="also import into this containerd")
    parser.add_argument("--list", action="store_true", help="print every image's name and reference")
    parser.add_argument("--rebuild", action="store_true", help="build the named images even when current")
    options = parser.parse_args(argv)
    if options.list:
        for recipe in RECIPES.values():
            print(f"{recipe.name}  {recipe.reference}  bases: {', '.join(recipe.bases) or '-'}")
        return 0
    unknown = [name for name in options.names if name not in RECIPES]
    if unknown or not options.names:
        parser.error(
            f"name one or more images of: {', '.join(RECIPES)}" + (f" (not {unknown})" if unknown else "")
        )
    built: set[str] = set()
    for name in options.names:
        build(name, built, frozenset(options.names) if options.rebuild else frozenset())
    if options.load_containerd:
        for name in options.names:
            load_into_containerd(name, options.load_containerd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
