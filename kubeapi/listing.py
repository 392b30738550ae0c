"""Lists as kube-apiserver serves them: every page of a paginated list from one snapshot (the
revision of its first page, which the continue token carries), ``resourceVersion`` and
``resourceVersionMatch`` as documented, a continue token whose revision was compacted away
answered 410 Expired (with a token for the rest of an inconsistent list, as the server gives),
and metadata-only lists (``PartialObjectMetadataList``) for a client that asks for them."""

from __future__ import annotations

import base64
import copy
import json

from kubeapi.resources import Resource
from kubeapi.selectors import field_selector, label_selector
from kubeapi.status import ApiError
from kubeapi.store import Expired, Json, Store

TOO_OLD = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this "
    "response to retrieve the remainder of the results. Continuing with the provided token "
    "results in an inconsistent list - objects that were created, modified, or deleted "
    "between the time the first chunk was returned and now may show up in the list."
)
PARTIAL_LIST = "PartialObjectMetadataList"


def select(store: Store, res: Resource, namespace: str | None, query: dict[str, str]) -> Json:
    labels = label_selector(query.get("labelSelector"))
    fields = field_selector(res.plural, query.get("fieldSelector"))
    limit = int(query.get("limit") or 0)
    token = query.get("continue")
    if token and query.get("resourceVersion"):
        raise ApiError(400, "specifying resource version is not allowed when using continue")
    with store.lock:
        if token:
            revision, after = _decode(token)
            try:
                view = store.at(res, revision)
            except Expired:
                raise ApiError(
                    410,
                    TOO_OLD,
                    metadata={"continue": _encode(store.revision, after)},
                ) from None
        else:
            revision, after = _revision(store, query, limit), None
            view = store.at(res, revision)
        keys = sorted(
            (k for k in view if namespace in (None, k[1])), key=lambda k: (k[1] or "", k[2])
        )
        matched: list[Json] = []
        more = False
        for key in keys:
            if after is not None and (key[1] or "", key[2]) <= after:
                continue
            obj = view[key]
            if not (labels(obj) and fields(obj)):
                continue
            if limit and len(matched) == limit:
                more = True
                break
            matched.append(copy.deepcopy(obj))
    metadata: Json = {"resourceVersion": str(revision)}
    if more and matched:
        last = matched[-1]["metadata"]
        metadata["continue"] = _encode(revision, (last.get("namespace", ""), last["name"]))
    if res.builtin:  # a built-in list's items carry no kind or apiVersion
        for item in matched:
            item.pop("kind", None)
            item.pop("apiVersion", None)
    return {
        "kind": f"{res.kind}List",
        "apiVersion": res.group_version,
        "metadata": metadata,
        "items": matched,
    }


def metadata_only(answer: Json) -> Json:
    """A list as ``PartialObjectMetadataList``: each item its metadata alone."""
    return {
        "kind": PARTIAL_LIST,
        "apiVersion": "meta.k8s.io/v1",
        "metadata": answer["metadata"],
        "items": [
            {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": item.get("metadata", {}),
            }
            for item in answer["items"]
        ],
    }


def wants_metadata_only(accept: str) -> bool:
    """The first media type the client accepts is a metadata-only list (kube-apiserver takes
    the first it can serve; the client offers plain JSON after it)."""
    first = accept.split(",")[0]
    params = dict(p.strip().partition("=")[::2] for p in first.split(";")[1:])
    return params.get("as") == PARTIAL_LIST and params.get("g") == "meta.k8s.io"


def _revision(store: Store, query: dict[str, str], limit: int) -> int:
    """The revision a list without a continue token is served at: the newest, unless
    ``resourceVersion`` names one with ``Exact`` (the default with a limit, as documented for
    paginated lists) — then that one, 410 if it was compacted away."""
    wanted = query.get("resourceVersion") or ""
    if wanted in ("", "0"):
        return store.revision
    revision = int(wanted)
    if revision > store.revision:
        raise ApiError(504, f"Timeout: Too large resource version: {revision}")
    match = query.get("resourceVersionMatch") or ("Exact" if limit else "NotOlderThan")
    if match == "NotOlderThan":
        return store.revision
    if match != "Exact":
        raise ApiError(400, f"unsupported resourceVersionMatch {match!r}")
    return revision


def _encode(revision: int, after: tuple[str, str] | None) -> str:
    start = list(after) if after else None
    token = {"v": "meta.k8s.io/v1", "rv": revision, "start": start}
    return base64.urlsafe_b64encode(json.dumps(token).encode()).decode()


def _decode(token: str) -> tuple[int, tuple[str, str] | None]:
    try:
        decoded = json.loads(base64.urlsafe_b64decode(token.encode()))
        start = decoded["start"]
        after = (str(start[0]), str(start[1])) if start else None
        return int(decoded["rv"]), after
    except (ValueError, TypeError, KeyError, IndexError):
        raise ApiError(400, "continue key is not valid") from None
