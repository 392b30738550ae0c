"""The chart installed onto the strict API server (kubeapi): every object it renders, sent
through the official client in helm's install order, is accepted (schema, names, namespaces
that exist) and reads back as sent."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from kubernetes import client as k8s
from kubernetes import utils

from kubeapi import ApiServer
from kubeapi.resources import BY_KIND
from tests.chart import Json, render
from tests.test_chart import CUSTOM_KINDS, EVERYTHING


def path(doc: Json) -> str:
    res = BY_KIND[doc["apiVersion"], doc["kind"]]
    meta = doc["metadata"]
    where = f"/namespaces/{meta['namespace']}" if res.namespaced else ""
    return f"{res.prefix}{where}/{res.plural}/{meta['name']}"


def read(api: ApiServer, doc: Json) -> Json:
    with urllib.request.urlopen(api.url + path(doc), timeout=10) as answer:
        found: Json = json.load(answer)
    return found


def install(api: ApiServer, docs: list[Json]) -> None:
    """As `helm install` would: in its order, each object created once."""
    client = api.client()
    for doc in docs:
        utils.create_from_dict(client, doc, verbose=False)


@pytest.mark.parametrize(
    "values", [{}, {"mode": "monitor"}, EVERYTHING], ids=["defaults", "monitor", "everything"]
)
def test_the_api_server_accepts_an_install(api: ApiServer, values: Json, tmp_path: Path) -> None:
    docs = render(values, tmp=tmp_path)
    # The jobs' namespace is theirs, made before remedy's Role is put in it.
    k8s.CoreV1Api(api.client()).create_namespace({"metadata": {"name": "ml"}})
    served = [d for d in docs if d["kind"] not in CUSTOM_KINDS]
    install(api, served)
    for doc in served:
        back = read(api, doc)
        assert {k: v for k, v in back.items() if k not in ("metadata", "status")} == {
            k: v for k, v in doc.items() if k != "metadata"
        }, path(doc)
        assert back["metadata"].items() >= doc["metadata"].items()


def test_a_monitoring_object_needs_its_crd(api: ApiServer, tmp_path: Path) -> None:
    """ServiceMonitor and PrometheusRule are the Prometheus Operator's: a cluster without its
    CRDs refuses them (404), as the emulator does, which serves no CRDs. So they stay off
    by default, and the install test leaves them out."""
    docs = render(EVERYTHING, tmp=tmp_path)
    install(api, [d for d in docs if d["kind"] == "Namespace"])
    for doc in (d for d in docs if d["kind"] in CUSTOM_KINDS):
        with pytest.raises(k8s.ApiException) as refused:
            k8s.CustomObjectsApi(api.client()).create_namespaced_custom_object(
                "monitoring.coreos.com",
                "v1",
                doc["metadata"]["namespace"],
                doc["kind"].lower() + "s",
                doc,
            )
        assert refused.value.status == 404
