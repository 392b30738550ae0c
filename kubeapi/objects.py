"""A test's or bench's direct hand on the emulator's objects, beside the HTTP API."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

from kubeapi.resources import resource
from kubeapi.store import Json, Key, Store


class Objects:
    """``api.objects["v1/nodes", None, "n1"] = node`` seeds (through the same write path as a
    POST or PUT: validated, uid and resourceVersion assigned), reads a copy, or deletes. Each
    read sees the cluster after its controllers acted (``tick``: a pod whose kubelet stopped
    it is gone), as the next request would."""

    def __init__(self, store: Store, tick: Callable[[], None]) -> None:
        self._store, self._tick = store, tick

    def __setitem__(self, key: Key, obj: Json) -> None:
        res, namespace, name = resource(key[0]), key[1], key[2]
        obj = json.loads(json.dumps(obj))
        meta = obj.setdefault("metadata", {})
        meta["name"] = name
        if namespace:
            meta["namespace"] = namespace
        meta.pop("resourceVersion", None)
        with self._store.lock:
            if namespace and ("v1/namespaces", None, namespace) not in self._store.objects:
                self["v1/namespaces", None, namespace] = {"metadata": {"name": namespace}}
            self._store.remove(key)  # a seed replaces: a new object, in the history too
            self._store.create(res, namespace, obj, strict=True, uid=meta.pop("uid", None))

    def __getitem__(self, key: Key) -> Json:
        self._tick()
        return self._store.get(resource(key[0]), key[1], key[2])

    def __delitem__(self, key: Key) -> None:
        self._store.get(resource(key[0]), key[1], key[2])
        self._store.remove(key)

    def __contains__(self, key: Key) -> bool:
        self._tick()
        return key in self._store.objects

    def keys(self, res: str) -> Iterator[Key]:
        self._tick()
        with self._store.lock:
            return iter(sorted(self._store.index.get(res, ()), key=lambda k: (k[1] or "", k[2])))
