"""A command run in a mount namespace of its own, with directories bound at fixed paths that exist there only.

Some peers read what a pod would have at paths they do not let one change (a ServiceAccount directory under
``/var/run/secrets``, a certificate directory under ``/tmp``). Binding a directory there in a private mount
namespace leaves the machine's own paths alone, but a bind needs its mount point to exist, and a mount point
made on the host stays there after the command: a ``/var/run/secrets/kubernetes.io/serviceaccount`` left on a
machine makes the Kubeflow SDK (and any client with the same check) take it for a pod.

So where a path does not exist, nothing is created on the host: inside the namespace, a tmpfs is mounted on
its nearest existing parent, everything that parent held is bound back into the tmpfs (directories with the
mounts under them, files, sockets; symbolic links copied), and the missing directories are made in the tmpfs.
The command sees the parent as it was, plus the new path; the host never sees either the tmpfs or the path.
The parent's old entries are reached through the shell's working directory, which stays on the directory the
tmpfs hides. Needs root (``unshare --mount``).
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

BIND_AT = r"""
set -eu
bind_at() {
    source=$1 target=$2
    if [ ! -e "$target" ]; then
        parent=$target
        while [ ! -e "$parent" ]; do parent=$(dirname "$parent"); done
        if [ "$parent" = / ]; then
            echo "private mounts: $target has no existing parent but /, which is not covered" >&2
            exit 1
        fi
        cd "$parent"
        mount -n -t tmpfs -o "mode=$(stat -c %a .),uid=$(stat -c %u .),gid=$(stat -c %g .)" \
            kubetrain-private "$parent"
        for entry in * .[!.]* ..?*; do
            if [ -L "./$entry" ]; then
                ln -s "$(readlink "./$entry")" "$parent/$entry"
            elif [ -d "./$entry" ]; then
                mkdir -p "$parent/$entry"
                mount -n --no-canonicalize --rbind "./$entry" "$parent/$entry"
            elif [ -e "./$entry" ]; then
                : > "$parent/$entry"
                mount -n --no-canonicalize --bind "./$entry" "$parent/$entry"
            fi
        done
        cd /
        mkdir -p "$target"
    fi
    mount -n --bind "$source" "$target"
}
"""
"""The shell function binding ``$1`` at ``$2``, making ``$2`` on a tmpfs over its nearest existing parent
when it is missing (the module's docstring says why and how). The glob patterns list every entry, hidden ones
included; a pattern that matches nothing stays as it is and names no entry, so the tests skip it. ``-n``:
mount(8) writes nothing of its own under ``/run/mount`` (its utab), which may be the host's, or appear in the
tmpfs before the parent's ``mount`` directory is bound back there. ``--no-canonicalize``: the relative source
resolves against the working directory (the hidden parent), not against the path as it now looks."""


def private_mounts_script(binds: Mapping[Path, Path]) -> str:
    """The ``sh -c`` script binding each source of ``binds`` (target -> source) at its target, then running
    its arguments in place of itself."""
    lines = [BIND_AT.strip()]
    lines += [
        f"bind_at {shlex.quote(str(source))} {shlex.quote(str(target))}" for target, source in binds.items()
    ]
    lines.append('exec "$@"')
    return "\n".join(lines) + "\n"


def in_private_mounts(command: Sequence[str], binds: Mapping[Path, Path]) -> list[str]:
    """``command`` run in a mount namespace of its own where each target of ``binds`` (target -> source) is
    its source, bound; the host's mounts and paths are left as they were. Needs root."""
    relative = [str(target) for target in binds if not target.is_absolute()]
    if relative:
        raise ValueError(f"private mounts need absolute targets, not {relative}")
    script = private_mounts_script(binds)
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sh", *command]
