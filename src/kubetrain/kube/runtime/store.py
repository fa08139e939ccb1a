"""The in-memory cache of one watched kind: raw wire JSON objects, indexed.

Objects are kept as the dicts the API server sent (no model decoding: cheapest in memory and CPU, and the
controller reads only a few fields). Callers must treat them as read-only; they are shared, not copied.
Single event loop, no locking: every method runs to completion without awaiting.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

KubeObject = Mapping[str, Any]


class ChangeType(enum.Enum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


@dataclass(frozen=True)
class ObjectChange:
    """One change to the cache. ``old`` is None when added; ``new`` is None when deleted (``old`` is then the
    object's last state, from the DELETED event when there was one)."""

    type: ChangeType
    old: KubeObject | None
    new: KubeObject | None

    @property
    def object(self) -> KubeObject:
        """The newest state known: ``new``, or ``old`` for a deletion."""
        latest = self.new if self.new is not None else self.old
        assert latest is not None
        return latest


def object_key(obj: KubeObject) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object (client-go's MetaNamespaceKeyFunc)."""
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    name = str(metadata.get("name", ""))
    return f"{namespace}/{name}" if namespace else name


def controller_reference(obj: KubeObject) -> Mapping[str, Any] | None:
    """The object's ownerReference with ``controller: true`` (at most one exists), if any.

    Event handlers map a child (pod, service) to the key of the job that owns it with this."""
    for reference in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if reference.get("controller"):
            return dict(reference)
    return None


def controller_uid(obj: KubeObject) -> str | None:
    """The UID of the object's controller owner."""
    reference = controller_reference(obj)
    uid = reference.get("uid") if reference is not None else None
    return str(uid) if uid else None


def resource_version(obj: KubeObject) -> str | None:
    version = (obj.get("metadata") or {}).get("resourceVersion")
    return str(version) if version is not None else None


class Store:
    """Objects by ``namespace/name``, indexed by controller owner UID and by the values of chosen labels."""

    def __init__(self, *, indexed_labels: Iterable[str] = ()) -> None:
        self._indexed_labels = tuple(indexed_labels)
        self._objects: dict[str, KubeObject] = {}
        self._by_owner: dict[str, set[str]] = {}
        self._owned_in_order: dict[str, list[str]] = {}
        """``by_owner``'s answer's keys, kept until an object joins or leaves the owner (a change of one
        does neither): sorting a 5,000-pod job's keys was a twentieth of each of its reconciles."""
        self._by_label: dict[str, dict[str, set[str]]] = {label: {} for label in self._indexed_labels}
        self._change_logs: dict[str, _ChangeLog] = {}
        """Per owner someone asked ``changes_since`` about, the keys of its objects as they changed."""
        self._owner_versions: dict[str, int] = {}
        self._changes = 0
        self.resource_version: str | None = None
        """The resourceVersion the cache is current to (last list or event); None before the first list."""

    def __len__(self) -> int:
        return len(self._objects)

    def __contains__(self, key: object) -> bool:
        return key in self._objects

    def __iter__(self) -> Iterator[KubeObject]:
        return iter(list(self._objects.values()))

    def keys(self) -> list[str]:
        return list(self._objects)

    def get(self, key: str) -> KubeObject | None:
        return self._objects.get(key)

    def get_named(self, namespace: str | None, name: str) -> KubeObject | None:
        return self._objects.get(f"{namespace}/{name}" if namespace else name)

    def objects(self, namespace: str | None = None) -> list[KubeObject]:
        """Every object, or those of one namespace."""
        if namespace is None:
            return list(self._objects.values())
        prefix = f"{namespace}/"
        return [obj for key, obj in self._objects.items() if key.startswith(prefix)]

    def by_owner(self, uid: str) -> list[KubeObject]:
        """Objects whose controller ownerReference points at ``uid``."""
        return [self._objects[key] for key in self.owned_keys(uid)]

    def owned(self, uid: str) -> Iterator[KubeObject]:
        """``by_owner``, read only as far as it is iterated (and before the store next changes): for a reader
        that may not need them (one that has seen them at this ``owner_version``)."""
        return (self._objects[key] for key in self.owned_keys(uid))

    def owned_keys(self, uid: str) -> list[str]:
        """The keys of the objects ``uid`` controls, sorted: the same list, not to be changed, for as long as
        none joins or leaves (a reader may tell by its identity)."""
        keys = self._owned_in_order.get(uid)
        if keys is None:
            keys = self._owned_in_order[uid] = sorted(self._by_owner.get(uid, ()))
        return keys

    def changes_since(self, uid: str, cursor: int | None) -> tuple[list[str] | None, int]:
        """The keys of ``uid``'s objects added, changed or removed since ``cursor`` (in order, repeats
        kept), and the cursor to ask with next time; None when they are not known (the first question, a
        cursor too old for the log, a re-list): the reader then reads every object again. The log is kept
        only for owners asked about, up to a bound after which its oldest half goes."""
        log = self._change_logs.get(uid)
        if log is None:
            # Numbered from the store's count of changes: no cursor into an earlier log of this owner (gone
            # with its objects, or with a re-list) falls inside this one.
            log = self._change_logs[uid] = _ChangeLog(start=self._changes)
            return None, log.end
        if cursor is None or not log.start <= cursor <= log.end:
            return None, log.end
        return log.keys[cursor - log.start :], log.end

    def owner_version(self, uid: str) -> int:
        """A number that changes whenever an object that ``uid`` controls is added, changed or removed: a
        reader that saw this number before has seen those objects as they are now. 0 while it controls none
        (an owner's number is forgotten with its last object: no number is ever given twice otherwise)."""
        return self._owner_versions.get(uid, 0)

    def by_label(self, label: str, value: str) -> list[KubeObject]:
        """Objects labelled ``label=value``; ``label`` must be one of the indexed labels."""
        try:
            index = self._by_label[label]
        except KeyError:
            message = f"label {label!r} is not indexed; index it with Store(indexed_labels=...)"
            raise KeyError(message) from None
        return [self._objects[key] for key in sorted(index.get(value, ()))]

    def replace(self, objects: Iterable[KubeObject], version: str | None) -> list[ObjectChange]:
        """Make the cache exactly ``objects`` as of ``version`` (a fresh list); returns what changed.

        Objects missing from the list come back as deletions, so a controller that missed their DELETED event
        during a broken watch still hears of them.
        """
        previous = self._objects
        owners_before = set(self._by_owner)
        self._objects = {}
        self._by_owner = {}
        self._owned_in_order = {}
        self._change_logs = {}  # what changed in the gap is not known: readers read everything again
        self._by_label = {label: {} for label in self._indexed_labels}
        changes: list[ObjectChange] = []
        for obj in objects:
            key = object_key(obj)
            self._insert(key, obj)
            old = previous.get(key)
            if old is None:
                changes.append(ObjectChange(ChangeType.ADDED, None, obj))
            elif resource_version(old) != resource_version(obj):
                changes.append(ObjectChange(ChangeType.MODIFIED, old, obj))
        gone = [old for key, old in previous.items() if key not in self._objects]
        changes.extend(ObjectChange(ChangeType.DELETED, old, None) for old in gone)
        for owner in owners_before - set(self._by_owner):  # owners whose objects all went with the re-list
            self._owner_versions.pop(owner, None)
        self.resource_version = version
        return changes

    def apply(self, change_type: ChangeType, obj: KubeObject) -> ObjectChange | None:
        """Apply one watch event; returns the change, or None when the cache already had exactly this."""
        key = object_key(obj)
        old = self._objects.get(key)
        version = resource_version(obj)
        if version is not None:
            self.resource_version = version
        if change_type is ChangeType.DELETED:
            if old is None:
                return None
            self._remove(key, old)
            return ObjectChange(ChangeType.DELETED, obj, None)
        if old is not None and resource_version(old) == version:
            return None
        return self._put(key, old, obj)

    def apply_written(self, obj: KubeObject) -> ObjectChange | None:
        """Keep the answer to this process's own write of a cached object (a status update's response) when
        it is newer than the cached copy; returns the change, or None when the cache is left as it was.

        The answer may arrive after the watch has already brought a later version: another client's change
        made just after the write (a spec patch suspending the job). Putting the answer in then would take
        the cache back to before that change, and nothing would bring it forward again until the object next
        changed (its watch event is already spent): every reconcile until then would act on the old spec. An
        object no longer cached (deleted meanwhile) is not put back either. The watch event carrying the
        answer is then no change."""
        key = object_key(obj)
        old = self._objects.get(key)
        if old is None or not _newer(obj, old):
            return None
        return self._put(key, old, obj)

    def _put(self, key: str, old: KubeObject | None, obj: KubeObject) -> ObjectChange:
        if old is not None:
            self._remove(key, old, staying_with=controller_uid(obj))
        self._insert(key, obj)
        return ObjectChange(ChangeType.ADDED if old is None else ChangeType.MODIFIED, old, obj)

    def _insert(self, key: str, obj: KubeObject) -> None:
        self._objects[key] = obj
        owner = controller_uid(obj)
        if owner is not None:
            owned = self._by_owner.setdefault(owner, set())
            if key not in owned:
                owned.add(key)
                self._owned_in_order.pop(owner, None)
            self._changed(owner, key)
        labels = (obj.get("metadata") or {}).get("labels") or {}
        for label, index in self._by_label.items():
            value = labels.get(label)
            if value is not None:
                index.setdefault(str(value), set()).add(key)

    def _remove(self, key: str, obj: KubeObject, staying_with: str | None = None) -> None:
        """``staying_with``: the owner of the object replacing it (a change, not a deletion): it stays in that
        owner's index."""
        del self._objects[key]
        owner = controller_uid(obj)
        if owner is not None and owner != staying_with:
            _discard(self._by_owner, owner, key)
            self._owned_in_order.pop(owner, None)
            if owner in self._by_owner:
                self._changed(owner, key)
            else:
                self._owner_versions.pop(owner, None)
                self._change_logs.pop(owner, None)
        labels = (obj.get("metadata") or {}).get("labels") or {}
        for label, index in self._by_label.items():
            value = labels.get(label)
            if value is not None:
                _discard(index, str(value), key)

    def _changed(self, owner: str, key: str) -> None:
        self._changes += 1
        self._owner_versions[owner] = self._changes
        log = self._change_logs.get(owner)
        if log is not None:
            log.append(key, bound=max(CHANGE_LOG_MIN_BOUND, 2 * len(self._by_owner.get(owner, ()))))


def _newer(obj: KubeObject, than: KubeObject) -> bool:
    """Whether ``obj`` is a later version of the object than ``than``. The API server's resourceVersions are
    etcd revisions, integers that grow with every write (client-go's mutation cache, which keeps write
    answers the same way, compares them so); one that is not an integer is not known to be newer: the watch
    brings that version."""
    try:
        return int(resource_version(obj) or "") > int(resource_version(than) or "")
    except ValueError:
        return False


CHANGE_LOG_MIN_BOUND = 1024
"""Keys an owner's change log holds at least before it drops its oldest half: a reader that falls that far
behind reads every object again, which costs what it would have without the log."""


class _ChangeLog:
    def __init__(self, start: int) -> None:
        self.keys: list[str] = []
        self.start = start
        """The cursor of ``keys[0]``."""

    @property
    def end(self) -> int:
        return self.start + len(self.keys)

    def append(self, key: str, bound: int) -> None:
        self.keys.append(key)
        if len(self.keys) > bound:
            half = len(self.keys) // 2
            del self.keys[:half]
            self.start += half


def _discard(index: dict[str, set[str]], value: str, key: str) -> None:
    keys = index.get(value)
    if keys is not None:
        keys.discard(key)
        if not keys:
            del index[value]
