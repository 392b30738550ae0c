"""Lists read a page at a time, as the API server sends them (JSON dicts), never through the
client's models: read whole and built into models, a 10,000-node list takes several times the
time and the memory (bench/kube_scale_bench.py measures both ways). The caller keeps what it
needs of each item; a page is dropped once its items are consumed (only the items' names are
kept, so that a list whose continue token expired starts again without repeating any)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes.client.exceptions import ApiException

from adapters.kubernetes.errors import api_errors
from adapters.kubernetes.objects import Json, meta
from remedy.core.errors import TransientError

PAGE = 500  # kubectl's and client-go's informers' page size
EXPIRED = 410  # a continue token older than the server's compaction
RESTARTS = 3
# Metadata only, where the server can (kube-apiserver can); anything else sends whole objects.
METADATA_ONLY = {
    "Accept": "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json"
}


def list_pages(
    list_call: Callable[..., Any],
    *args: Any,
    what: str,
    limit: int = PAGE,
    **options: Any,
) -> Iterator[Json]:
    """Every item ``list_call`` lists (a generated list method: ``CoreV1Api.list_node``,
    ``CustomObjectsApi.list_cluster_custom_object`` …), ``limit`` per request, following
    ``continue`` to the end. ``args`` and ``options`` (selectors, ``_headers``) go to it as they
    are; ``what`` names the resource in errors. Errors map as ``api_errors`` maps them: a 404
    (no such collection) is NodeGone, which a caller for whom it means something else says.

    A continue token that expired (410: the list outlived the server's compaction of its
    snapshot) starts the list again from its first page, and the items already given are not
    given twice (by namespace and name); after ``RESTARTS`` of those, a TransientError."""
    token: str | None = None
    given: set[tuple[str, str]] = set()
    restarts = 0
    while True:
        page = _page(list_call, args, what, limit, token, options)
        if page is None:  # the token expired: from the start
            restarts += 1
            if restarts > RESTARTS:
                raise TransientError(f"list {what}: the continue token expired {RESTARTS} times")
            token = None
            continue
        for item in page.get("items") or []:
            key = (meta(item).get("namespace", ""), meta(item).get("name", ""))
            if key not in given:
                given.add(key)
                yield item
        token = page.get("metadata", {}).get("continue")
        if not token:
            return


def _page(
    list_call: Callable[..., Any],
    args: tuple[Any, ...],
    what: str,
    limit: int,
    token: str | None,
    options: dict[str, Any],
) -> Json | None:
    """One page; None when ``token`` expired (410 on a continued list)."""
    with api_errors("list", what):
        try:
            response = list_call(
                *args, limit=limit, _continue=token, _preload_content=False, **options
            )
        except ApiException as exc:
            if token and exc.status == EXPIRED:
                return None
            raise
        page: Json = json.loads(response.data)
    return page


def count(list_call: Callable[..., Any], *args: Any, what: str, **options: Any) -> int:
    """How many items ``list_call`` lists, reading their metadata only where the server can."""
    pages = list_pages(list_call, *args, what=what, _headers=dict(METADATA_ONLY), **options)
    return sum(1 for _ in pages)
