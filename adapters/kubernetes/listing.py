"""Lists read a page at a time, as the API server sends them (JSON dicts), never through the
client's models: read whole and built into models, a 10,000-node list takes several times the
time and the memory (bench/kube_scale_bench.py measures both ways). The caller keeps what it
needs of each item; a page is dropped once its items are consumed."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from adapters.kubernetes.errors import api_errors
from adapters.kubernetes.objects import Json

PAGE = 500  # kubectl's and client-go's informers' page size
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
    (no such collection) is NodeGone, which a caller for whom it means something else says; an
    expired continue token (410: the list outlived the server's compaction) is a
    TransientError, and the retry starts the list afresh."""
    token: str | None = None
    while True:
        with api_errors("list", what):
            response = list_call(
                *args, limit=limit, _continue=token, _preload_content=False, **options
            )
            page: Json = json.loads(response.data)
        yield from page.get("items") or []
        token = page.get("metadata", {}).get("continue")
        if not token:
            return


def count(list_call: Callable[..., Any], *args: Any, what: str, **options: Any) -> int:
    """How many items ``list_call`` lists, reading their metadata only where the server can."""
    pages = list_pages(list_call, *args, what=what, _headers=dict(METADATA_ONLY), **options)
    return sum(1 for _ in pages)
