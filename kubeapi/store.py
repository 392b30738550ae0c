"""The emulator's storage: objects by (resource, namespace, name), one resourceVersion counter
for all of them, and the write path every change goes through — defaults, field validation
against the OpenAPI schema, the server's own rules, optimistic concurrency and the status
subresource split."""

from __future__ import annotations

import copy
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubeapi import schema as schemas
from kubeapi.clock import Clock
from kubeapi.fields import track
from kubeapi.resources import Resource
from kubeapi.status import ApiError, conflict, invalid, not_found
from kubeapi.validation import object_errors, update_errors

Json = dict[str, Any]
Key = tuple[str, str | None, str]  # (resource key, namespace, name)
JOB_UID_LABEL = "batch.kubernetes.io/controller-uid"
# Earlier versions kept for lists at a past revision (continue tokens): past this many, the
# older half is compacted away, as etcd compacts its history (a token older than that: 410).
HISTORY_MAX = 20_000


@dataclass
class Store:
    """``extra_fields``: fields a newer API server would know, by OpenAPI definition name
    (``{"io.k8s.api.core.v1.PodSpec": {"futureField"}}``): kept, where others are dropped.

    A stored object is never changed in place (a write stores a new one), so the history of
    earlier versions holds references, not copies."""

    extra_fields: dict[str, set[str]] = field(default_factory=dict)
    objects: dict[Key, Json] = field(default_factory=dict)
    revision: int = 0
    lock: threading.RLock = field(default_factory=threading.RLock)
    clock: Clock = field(default_factory=Clock)
    # The keys of each resource (a list walks its resource's objects, not every object).
    index: dict[str, set[Key]] = field(default_factory=dict)
    # (revision of a write, its key, the object before it or None), oldest first.
    history: list[tuple[int, Key, Json | None]] = field(default_factory=list)
    compacted: int = 0  # the oldest revision a list can still be served at
    deleting: set[Key] = field(default_factory=set)  # objects with a deletionTimestamp

    # -- reads ---------------------------------------------------------------------------------
    def get(self, res: Resource, namespace: str | None, name: str) -> Json:
        with self.lock:
            found = self.objects.get((res.key, namespace, name))
            if found is None:
                raise not_found(res.plural, name)
            return copy.deepcopy(found)

    def items(self, res: Resource, namespace: str | None = None) -> list[Json]:
        """Copies of the resource's objects now (in ``namespace`` if given), in key order."""
        with self.lock:
            keys = sorted(
                (k for k in self.index.get(res.key, ()) if namespace in (None, k[1])),
                key=lambda k: (k[1] or "", k[2]),
            )
            return [copy.deepcopy(self.objects[k]) for k in keys]

    def at(self, res: Resource, revision: int) -> dict[Key, Json]:
        """The resource's objects as they were at ``revision`` (not copies: read only), from
        the current ones with every later write undone; Expired (410) where history that old
        was compacted away."""
        with self.lock:
            view = {k: self.objects[k] for k in self.index.get(res.key, ())}
            if revision >= self.revision:
                return view
            if revision < self.compacted:
                raise Expired(revision, self.compacted)
            for written, key, before in reversed(self.history):
                if written <= revision:
                    break
                if key[0] != res.key:
                    continue
                if before is None:
                    view.pop(key, None)
                else:
                    view[key] = before
            return view

    def compact(self) -> None:
        """Forget every earlier version (etcd's compaction): lists at an older revision, and
        their continue tokens, answer 410 Gone."""
        with self.lock:
            self.compacted = self.revision
            self.history.clear()

    # -- writes --------------------------------------------------------------------------------
    def create(
        self,
        res: Resource,
        namespace: str | None,
        obj: Json,
        *,
        strict: bool = False,
        uid: str | None = None,
        manager: str | None = None,
    ) -> tuple[Json, list[str]]:
        """``uid``: a test's seed may fix it (the API server always assigns it); ``manager``:
        the writer its managedFields record (none for a seed)."""
        obj = copy.deepcopy(obj)
        meta = obj.setdefault("metadata", {})
        if res.namespaced:
            if meta.get("namespace") not in (None, namespace):
                raise ApiError(400, "the namespace of the object does not match the request")
            meta["namespace"] = namespace
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = f"{meta['generateName']}{uuid.uuid4().hex[:5]}"
        obj.setdefault("apiVersion", res.group_version)
        obj.setdefault("kind", res.kind)
        with self.lock:
            key = (res.key, namespace if res.namespaced else None, meta.get("name", ""))
            if key in self.objects:
                raise ApiError(
                    409, f'{res.plural} "{key[2]}" already exists', reason="AlreadyExists"
                )
            if res.namespaced and res.plural != "namespaces":
                self._namespace_open(namespace or "")
            if meta.get("resourceVersion"):
                raise ApiError(400, "resourceVersion should not be set on objects to be created")
            meta["uid"] = uid or str(uuid.uuid4())
            meta["creationTimestamp"] = self.clock.stamp()
            meta.setdefault("generation", 1)
            if res.kind == "Job":
                _job_defaults(obj)
            warnings = self._check(res, obj, None, strict)
            if manager:
                track(obj, None, manager, res.group_version, self.clock.stamp())
            return self._store(key, obj), warnings

    def update(
        self,
        res: Resource,
        namespace: str | None,
        name: str,
        change: Callable[[Json], Json],
        *,
        subresource: str | None = None,
        strict: bool = False,
        manager: str | None = None,
        deleting: bool = False,
    ) -> tuple[Json, list[str]]:
        """Apply ``change`` to the stored object: it returns the new object, whose
        ``metadata.resourceVersion`` (if set) must be the stored one (409 otherwise).
        ``deleting``: the server's own deletion, which alone sets the deletion fields."""
        with self.lock:
            key = (res.key, namespace if res.namespaced else None, name)
            old = self.get(res, key[1], name)
            new = change(copy.deepcopy(old))
            meta = new.setdefault("metadata", {})
            wanted = meta.get("resourceVersion")
            if wanted and wanted != old["metadata"]["resourceVersion"]:
                raise conflict(
                    res.plural,
                    name,
                    "the object has been modified; please apply "
                    "your changes to the latest version and try again",
                )
            if (
                meta.get("name", name) != name
                or meta.get("uid", old["metadata"]["uid"]) != old["metadata"]["uid"]
            ):
                raise ApiError(400, "the name and uid of an object cannot change")
            for kept in ("uid", "creationTimestamp", "namespace", "deletionTimestamp"):
                if kept in old["metadata"] and not (deleting and kept == "deletionTimestamp"):
                    meta[kept] = old["metadata"][kept]
            new = _split_status(res, old, new, subresource)
            warnings = self._check(res, new, old, strict)
            if _without_version(new) == _without_version(old):
                return copy.deepcopy(self.objects[key]), warnings  # a no-op write changes nothing
            if old.get("spec") != new.get("spec"):
                meta["generation"] = old["metadata"].get("generation", 1) + 1
            if manager:
                track(new, old, manager, res.group_version, self.clock.stamp())
            return self._store(key, new), warnings

    def remove(self, key: Key) -> None:
        with self.lock:
            before = self.objects.pop(key, None)
            if before is None:
                return
            self.revision += 1
            self.index.get(key[0], set()).discard(key)
            self.deleting.discard(key)
            self._remember(key, before)

    def _store(self, key: Key, obj: Json) -> Json:
        self.revision += 1
        obj["metadata"]["resourceVersion"] = str(self.revision)
        before = self.objects.get(key)
        self.objects[key] = obj
        self.index.setdefault(key[0], set()).add(key)
        if obj["metadata"].get("deletionTimestamp"):
            self.deleting.add(key)
        else:
            self.deleting.discard(key)
        self._remember(key, before)
        return copy.deepcopy(obj)

    def _remember(self, key: Key, before: Json | None) -> None:
        self.history.append((self.revision, key, before))
        if len(self.history) > HISTORY_MAX:
            cut = len(self.history) // 2
            self.compacted = self.history[cut - 1][0]
            del self.history[:cut]

    def _check(self, res: Resource, obj: Json, old: Json | None, strict: bool) -> list[str]:
        """The OpenAPI schema (unknown fields dropped with a warning, or refused when the
        client asked for Strict) and the server's own rules."""
        name = obj.get("metadata", {}).get("name", "")
        errors: list[tuple[str, str]] = []
        unknown: list[str] = []
        if res.builtin:
            top = schemas.kind_schema(res.kind, res.group_version)
            unknown = schemas.prune_unknown(obj, top, "", self.extra_fields)
            if strict and unknown:
                raise ApiError(400, f'strict decoding error: unknown field "{unknown[0]}"')
            # The fields a newer server knows are checked by none of this version's schemas.
            known = copy.deepcopy(obj)
            schemas.prune_unknown(known, top, "", {})
            errors += schemas.type_errors(known, res.kind, res.group_version)
        errors += object_errors(res.kind, obj)
        if old is not None:
            errors += update_errors(res.kind, old, obj)
        if errors:
            raise invalid(res.kind, name, errors)
        return [f'unknown field "{u}"' for u in unknown]

    def _namespace_open(self, namespace: str) -> None:
        found = self.objects.get(("v1/namespaces", None, namespace))
        if found is None:
            raise not_found("namespaces", namespace)
        if found.get("status", {}).get("phase") == "Terminating":
            raise ApiError(
                403,
                f"unable to create new content in namespace {namespace} because it is being "
                "terminated",
                causes=[
                    {
                        "reason": "NamespaceTerminating",
                        "field": "metadata.namespace",
                        "message": f"namespace {namespace} is being terminated",
                    }
                ],
            )


def _without_version(obj: Json) -> Json:
    return {**obj, "metadata": {k: v for k, v in obj["metadata"].items() if k != "resourceVersion"}}


def _split_status(res: Resource, old: Json, new: Json, subresource: str | None) -> Json:
    """The main resource cannot change status, the status subresource only status."""
    if not res.status_subresource:
        return new
    if subresource == "status":
        kept = copy.deepcopy(old)
        kept["metadata"]["resourceVersion"] = new["metadata"].get("resourceVersion")
        if "status" in new:
            kept["status"] = new["status"]
        else:
            kept.pop("status", None)
        return kept
    if "status" in old:
        new["status"] = copy.deepcopy(old["status"])
    else:
        new.pop("status", None)
    return new


def _job_defaults(job: Json) -> None:
    """The Job controller's selector: refused when set by hand without ``manualSelector``."""
    spec = job.setdefault("spec", {})
    uid = job["metadata"]["uid"]
    if spec.get("manualSelector"):
        return
    if spec.get("selector"):
        raise invalid(
            "Job",
            job["metadata"].get("name", ""),
            [("spec.selector", "Invalid value: `selector` not auto-generated")],
        )
    spec["selector"] = {"matchLabels": {JOB_UID_LABEL: uid}}
    labels = spec.setdefault("template", {}).setdefault("metadata", {}).setdefault("labels", {})
    labels.update(
        {
            JOB_UID_LABEL: uid,
            "batch.kubernetes.io/job-name": job["metadata"]["name"],
            "controller-uid": uid,
            "job-name": job["metadata"]["name"],
        }
    )


class Expired(ApiError):
    """A read at a revision compacted away: 410, as etcd answers."""

    def __init__(self, revision: int, compacted: int) -> None:
        super().__init__(410, f"too old resource version: {revision} ({compacted})")
