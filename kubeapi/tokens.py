"""Service-account tokens as kube-apiserver issues and reviews them: TokenRequest
(``POST …/serviceaccounts/{name}/token``) mints a JWT (HMAC-signed with the emulator's own key;
a real server signs with its service-account key), and TokenReview (``POST tokenreviews``)
answers who a token belongs to. Both are create-only and store nothing.

A review checks what kube-apiserver's service-account authenticator checks, in its order and
with its messages: the signature, the audiences, the expiry (with go-jose's 60 s leeway, on the
emulator's clock), the service account (still there, same uid) and the bound pod (still there,
same uid, not deleted for more than the leeway)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import uuid
from datetime import datetime, timedelta
from typing import Any

from kubeapi import schema as schemas
from kubeapi.clock import parse, stamp
from kubeapi.http import Request
from kubeapi.status import ApiError, conflict, invalid, not_found
from kubeapi.store import Json, Store

AUTH = "authentication.k8s.io/v1"
ISSUER = "https://kubernetes.default.svc.cluster.local"
API_AUDIENCES = ("https://kubernetes.default.svc",)  # --api-audiences: a token's default
DEFAULT_EXPIRATION_S = 3600
MIN_EXPIRATION_S = 600  # validation.MinTokenAgeSec
MAX_EXPIRATION_S = 1 << 32
LEEWAY_S = 60  # go-jose's jwt.DefaultLeeway: on expiry, and on a deleted pod or account
EXTRA = "authentication.kubernetes.io/"
REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
_TOKEN = re.compile(r"^/api/v1/namespaces/([^/]+)/serviceaccounts/([^/]+)/token$")
_SA, _PODS, _NODES = "v1/serviceaccounts", "v1/pods", "v1/nodes"


class Tokens:
    """The two endpoints. ``audiences``: the API server's own (what a TokenRequest without
    audiences is for, and what a TokenReview without audiences asks for)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.audiences = list(API_AUDIENCES)
        self._key = secrets.token_bytes(32)

    def serves(self, path: str) -> bool:
        return path == REVIEWS or _TOKEN.match(path) is not None

    def serve(self, request: Request, *, strict: bool) -> tuple[int, Json, list[str]]:
        if request.method != "POST":
            # Both are create-only: kube-apiserver registers no other verb on them.
            raise ApiError(405, "the server does not allow this method on the requested resource")
        if not isinstance(request.data, dict):
            raise ApiError(400, "the request body is not a JSON object")
        matched = _TOKEN.match(request.path)
        if matched is None:
            return self._review(request.data, strict)
        return self._request(matched[1], matched[2], request.data, strict)

    # -- TokenRequest --------------------------------------------------------------------------
    def _request(
        self, namespace: str, name: str, body: Json, strict: bool
    ) -> tuple[int, Json, list[str]]:
        warnings = _decode(body, "TokenRequest", strict)
        meta, spec = body.get("metadata") or {}, dict(body.get("spec") or {})
        for field, value, where in (
            ("name", name, "the service account name"),
            ("namespace", namespace, "the service account namespace"),
        ):
            if meta.get(field) and meta[field] != value:
                why = f"Invalid value: {json.dumps(meta[field])}: must match {where} if specified"
                raise invalid(
                    "TokenRequest.authentication.k8s.io", name, [(f"metadata.{field}", why)]
                )
        with self.store.lock:
            account = self._get(_SA, namespace, name, "serviceaccounts")
            spec["audiences"] = spec.get("audiences") or list(self.audiences)
            if spec.get("expirationSeconds") is None:
                spec["expirationSeconds"] = DEFAULT_EXPIRATION_S
            _check_expiration(spec["expirationSeconds"])
            bound = self._bound(namespace, name, spec.get("boundObjectRef"))
            now = self.store.clock.now()
            claims = _claims(account, bound, spec, now)
        answer = {
            "kind": "TokenRequest",
            "apiVersion": AUTH,
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": account["metadata"]["uid"],
                "creationTimestamp": stamp(now),
            },
            "spec": spec,
            "status": {
                "token": self._sign(claims),
                "expirationTimestamp": stamp(now + timedelta(seconds=spec["expirationSeconds"])),
            },
        }
        return 201, answer, warnings

    def _bound(self, namespace: str, account: str, ref: Json | None) -> Json:
        """The pod the token is bound to, as its claims name it (empty: bound to nothing)."""
        if not ref:
            return {}
        group, _, version = str(ref.get("apiVersion") or "").rpartition("/")
        kind, name = ref.get("kind") or "", ref.get("name") or ""
        if (group, kind) == ("", "Secret"):
            raise not_found("secrets", name)  # the emulator serves no Secrets: none exists
        if (group, kind) != ("", "Pod"):
            # A Node too, which kube-apiserver ≥ 1.33 binds: remedy binds to pods only.
            raise ApiError(
                400, f"cannot bind token to object of type {group}/{version}, Kind={kind}"
            )
        pod = self._get(_PODS, namespace, name, "pods")
        if (pod.get("spec", {}).get("serviceAccountName") or "default") != account:
            raise ApiError(
                400,
                f'cannot bind token for serviceaccount "{account}" to pod running with '
                "different serviceaccount name.",
            )
        uid = pod["metadata"]["uid"]
        if ref.get("uid") and ref["uid"] != uid:
            raise conflict(
                "Pod",
                name,
                f"the UID in the bound object reference ({ref['uid']}) does not match the UID "
                "in record. The object might have been deleted and then recreated",
            )
        bound: Json = {"pod": {"name": name, "uid": uid}}
        node_name = pod.get("spec", {}).get("nodeName")
        if node_name:
            # A node that is gone still names itself: its name only, as kube-apiserver does.
            node = self.store.objects.get((_NODES, None, node_name))
            bound["node"] = {"name": node_name} | ({"uid": node["metadata"]["uid"]} if node else {})
        return bound

    # -- TokenReview ---------------------------------------------------------------------------
    def _review(self, body: Json, strict: bool) -> tuple[int, Json, list[str]]:
        warnings = _decode(body, "TokenReview", strict)
        spec = body.get("spec") or {}
        if not spec.get("token"):
            raise ApiError(400, "token is required for TokenReview in authentication")
        wanted = spec.get("audiences") or list(self.audiences)
        user, audiences, error = self._authenticate(str(spec["token"]), wanted)
        # The Go struct's omitempty: an unauthenticated review has no "authenticated" at all.
        status: Json = {"user": user}
        if audiences:
            status |= {"authenticated": True, "audiences": audiences}
        else:
            status["error"] = error
        meta = {"creationTimestamp": None} | (body.get("metadata") or {})
        review = {"kind": "TokenReview", "apiVersion": AUTH, "metadata": meta, "spec": spec}
        return 201, review | {"status": status}, warnings

    def _authenticate(self, token: str, wanted: list[str]) -> tuple[Json, list[str], str]:
        """(user, audiences, "") for a token that proves its account; ({}, [], why) if not."""
        claims = self._verified(token)
        if claims is None:
            return {}, [], "invalid bearer token"
        theirs = list(claims.get("aud") or [])
        audiences = [a for a in theirs if a in wanted]
        if not audiences:
            return (
                {},
                [],
                (f"token audiences {_q(theirs)} is invalid for the target audiences {_q(wanted)}"),
            )
        with self.store.lock:
            why = self._invalid(claims)
        if why:
            return {}, [], why
        return _user(claims), audiences, ""

    def _invalid(self, claims: Json) -> str:
        """Why a token with a good signature and audience proves nothing now (empty: it does)."""
        now = self.store.clock.now()
        at = now.timestamp()
        if at + LEEWAY_S < claims["nbf"]:
            return "service account token is not valid yet"
        if at - LEEWAY_S > claims["exp"]:
            return "service account token has expired"
        if at + LEEWAY_S < claims["iat"]:
            return "service account token is issued in the future"
        kube = claims["kubernetes.io"]
        namespace, account = kube["namespace"], kube["serviceaccount"]
        found = self.store.objects.get((_SA, namespace, account["name"]))
        if found is None:
            return f'serviceaccounts "{account["name"]}" not found'
        if found["metadata"]["uid"] != account["uid"]:
            return (
                f"service account UID ({found['metadata']['uid']}) does not match claim "
                f"({account['uid']})"
            )
        if _deleted_before(found, now):
            return f"service account {namespace}/{account['name']} has been deleted"
        pod = kube.get("pod")
        if pod:
            live = self.store.objects.get((_PODS, namespace, pod["name"]))
            if live is None:
                return "service account token has been invalidated"
            if live["metadata"]["uid"] != pod["uid"]:
                return (
                    f"pod UID ({live['metadata']['uid']}) does not match service account pod "
                    f"ref claim ({pod['uid']})"
                )
            if _deleted_before(live, now):
                return "service account token has been invalidated"
        return ""

    # -- the JWT -------------------------------------------------------------------------------
    def _sign(self, claims: Json) -> str:
        header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
        signature = hmac.new(self._key, f"{header}.{payload}".encode(), hashlib.sha256)
        return f"{header}.{payload}.{_b64(signature.digest())}"

    def _verified(self, token: str) -> Json | None:
        """The claims of a token this server signed; None for anything else."""
        parts = token.split(".")
        if len(parts) != 3:
            return None
        expected = hmac.new(self._key, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256)
        try:
            if not hmac.compare_digest(_unb64(parts[2]), expected.digest()):
                return None
            claims: Any = json.loads(_unb64(parts[1]))
        except ValueError:
            return None
        if not isinstance(claims, dict) or claims.get("iss") != ISSUER:
            return None
        return claims

    # -- helpers -------------------------------------------------------------------------------
    def _get(self, key: str, namespace: str, name: str, plural: str) -> Json:
        found = self.store.objects.get((key, namespace, name))
        if found is None:
            raise not_found(plural, name)
        return found


def _decode(body: Json, kind: str, strict: bool) -> list[str]:
    """What decoding the body does on a real server: unknown fields dropped with a warning
    (refused under Strict), a value of the wrong type a 400."""
    unknown = schemas.prune_unknown(body, schemas.kind_schema(kind, AUTH), "", {})
    if strict and unknown:
        raise ApiError(400, f'strict decoding error: unknown field "{unknown[0]}"')
    for where, what in schemas.type_errors(body, kind, AUTH):
        if "is a required property" not in what:  # absent is the zero value, for Create to judge
            raise ApiError(400, f"{kind} in version v1 cannot be handled: {where}: {what}")
    return [f'unknown field "{u}"' for u in unknown]


def _check_expiration(seconds: Any) -> None:
    errors = []
    if seconds < MIN_EXPIRATION_S:
        errors.append("may not specify a duration less than 10 minutes")
    if seconds > MAX_EXPIRATION_S:
        errors.append("may not specify a duration larger than 2^32 seconds")
    if errors:
        where = "spec.expirationSeconds"
        raise invalid(
            "TokenRequest.authentication.k8s.io",
            "",
            [(where, f"Invalid value: {seconds}: {e}") for e in errors],
        )


def _claims(account: Json, bound: Json, spec: Json, now: datetime) -> Json:
    meta = account["metadata"]
    at = int(now.timestamp())
    kube: Json = {
        "namespace": meta["namespace"],
        "serviceaccount": {"name": meta["name"], "uid": meta["uid"]},
    }
    return {
        "aud": list(spec["audiences"]),
        "exp": at + int(spec["expirationSeconds"]),
        "iat": at,
        "nbf": at,
        "iss": ISSUER,
        "jti": str(uuid.uuid4()),
        "sub": f"system:serviceaccount:{meta['namespace']}:{meta['name']}",
        "kubernetes.io": kube | bound,
    }


def _user(claims: Json) -> Json:
    """The user the service-account authenticator answers (ServiceAccountInfo.UserInfo), with
    the group every authenticated user gets."""
    kube = claims["kubernetes.io"]
    namespace, account = kube["namespace"], kube["serviceaccount"]
    extra: dict[str, list[str]] = {}
    if kube.get("pod"):
        extra[EXTRA + "pod-name"] = [kube["pod"]["name"]]
        extra[EXTRA + "pod-uid"] = [kube["pod"]["uid"]]
    extra[EXTRA + "credential-id"] = [f"JTI={claims['jti']}"]
    if kube.get("node"):
        extra[EXTRA + "node-name"] = [kube["node"]["name"]]
        if kube["node"].get("uid"):
            extra[EXTRA + "node-uid"] = [kube["node"]["uid"]]
    return {
        "username": claims["sub"],
        "uid": account["uid"],
        "groups": [
            "system:serviceaccounts",
            f"system:serviceaccounts:{namespace}",
            "system:authenticated",
        ],
        "extra": extra,
    }


def _deleted_before(obj: Json, now: datetime) -> bool:
    """Deleted more than the leeway ago (a pod Terminating for its grace period still counts)."""
    deleted = obj["metadata"].get("deletionTimestamp")
    return bool(deleted) and parse(deleted) < now - timedelta(seconds=LEEWAY_S)


def _q(values: list[str]) -> str:
    """Go's %q of a []string: ["a" "b"]."""
    return "[" + " ".join(json.dumps(v) for v in values) + "]"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as bad:
        raise ValueError(str(bad)) from None
