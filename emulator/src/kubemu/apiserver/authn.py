"""Who is asking: the emulated API server's authentication, as kube-apiserver's.

Two kinds of bearer token are accepted. The admin token the kubeconfig carries maps to a
member of ``system:masters`` (full access, as a cluster's admin certificate). ServiceAccount
tokens are JWTs the server signs (HS256 with a key born with the server): the TokenRequest
API (``POST .../serviceaccounts/NAME/token``, what ``kubectl create token`` calls) issues
bound, expiring ones; the token controller fills Secrets of type
``kubernetes.io/service-account-token`` with long-lived ones bound to the Secret. A token
stops working when its ServiceAccount (or Secret) is deleted or re-created, as on a cluster.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from typing import Any

import orjson

from kubemu.storage.errors import ApiError
from kubemu.storage.store import Store

Obj = dict[str, Any]
ISSUER = "https://kubernetes.default.svc.cluster.local"
TOKEN_SECRET_TYPE = "kubernetes.io/service-account-token"  # noqa: S105 -- a type name
SA_ANNOTATION = "kubernetes.io/service-account.name"
SA_UID_ANNOTATION = "kubernetes.io/service-account.uid"
DEFAULT_EXPIRY_S = 3600
UNAUTHORIZED = ApiError(401, "Unauthorized", "Unauthorized")


@dataclass(frozen=True)
class UserInfo:
    """An authenticated user: its name and groups, as RBAC subjects match them."""

    name: str
    groups: tuple[str, ...]
    uid: str = ""

    @property
    def is_master(self) -> bool:
        return "system:masters" in self.groups

    def as_dict(self) -> Obj:
        info: Obj = {"username": self.name, "groups": list(self.groups)}
        if self.uid:
            info["uid"] = self.uid
        return info


ADMIN = UserInfo("kubernetes-admin", ("system:masters", "system:authenticated"))


def service_account_user(namespace: str, name: str, uid: str = "") -> UserInfo:
    groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")
    return UserInfo(
        f"system:serviceaccount:{namespace}:{name}", (*groups, "system:authenticated"), uid
    )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Authenticator:
    """Maps a request's ``Authorization`` header to a :class:`UserInfo` (or 401)."""

    def __init__(self, store: Store, admin_token: str | None) -> None:
        self.store = store
        self._admin = admin_token
        self._key = secrets.token_bytes(32)

    def user(self, header: str) -> UserInfo:
        if self._admin is None:
            return ADMIN
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            raise UNAUTHORIZED
        if hmac.compare_digest(token.encode(), self._admin.encode()):
            return ADMIN
        return self._service_account(token.strip())

    # -- issuing ---------------------------------------------------------------------
    def sign(self, claims: Obj) -> str:
        head = _b64(orjson.dumps({"alg": "HS256", "kid": "testbed-emulator", "typ": "JWT"}))
        body = _b64(orjson.dumps(claims))
        mac = hmac.new(self._key, f"{head}.{body}".encode(), hashlib.sha256).digest()
        return f"{head}.{body}.{_b64(mac)}"

    def token_request(self, sa: Obj, spec: Obj) -> Obj:
        """The TokenRequest answer for ServiceAccount ``sa`` (its spec: expiry, audiences)."""
        meta = sa["metadata"]
        expiry = int(spec.get("expirationSeconds") or DEFAULT_EXPIRY_S)
        if expiry < 600:
            raise ApiError(
                422, "Invalid", "spec.expirationSeconds: Invalid value: may not specify a"
                f" duration less than 10 minutes (got {expiry})",
            )  # fmt: skip
        now = int(time.time())
        audiences = list(spec.get("audiences") or [ISSUER])
        claims = {
            "aud": audiences, "exp": now + expiry, "iat": now, "nbf": now, "iss": ISSUER,
            "sub": f"system:serviceaccount:{meta['namespace']}:{meta['name']}",
            "kubernetes.io": {"namespace": meta["namespace"],
                              "serviceaccount": {"name": meta["name"], "uid": meta["uid"]}},
        }  # fmt: skip
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now + expiry))
        return {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                         "creationTimestamp": None},
            "spec": {"audiences": audiences, "expirationSeconds": expiry,
                     "boundObjectRef": spec.get("boundObjectRef")},
            "status": {"token": self.sign(claims), "expirationTimestamp": stamp},
        }  # fmt: skip

    def fill_token_secret(self, secret: Obj, ca_pem: bytes) -> Obj | None:
        """The token controller: a service-account-token Secret gets ``token``, ``ca.crt``
        and ``namespace`` (the legacy, non-expiring token bound to that Secret)."""
        if secret.get("type") != TOKEN_SECRET_TYPE or (secret.get("data") or {}).get("token"):
            return None
        meta = secret["metadata"]
        namespace = meta["namespace"]
        sa_name = (meta.get("annotations") or {}).get(SA_ANNOTATION)
        sa = self.store.try_get("serviceaccounts", namespace, sa_name) if sa_name else None
        if sa is None:
            return None  # a real controller waits for the ServiceAccount too
        claims = {
            "iss": "kubernetes/serviceaccount",
            "sub": f"system:serviceaccount:{namespace}:{sa_name}",
            "kubernetes.io/serviceaccount/namespace": namespace,
            "kubernetes.io/serviceaccount/secret.name": meta["name"],
            "kubernetes.io/serviceaccount/secret.uid": meta["uid"],
            "kubernetes.io/serviceaccount/service-account.name": sa_name,
            "kubernetes.io/serviceaccount/service-account.uid": sa["metadata"]["uid"],
        }  # fmt: skip
        data = {"token": self.sign(claims), "ca.crt": ca_pem.decode(), "namespace": namespace}
        filled = dict(secret)
        filled["data"] = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
        annotations = {**(meta.get("annotations") or {}), SA_UID_ANNOTATION: sa["metadata"]["uid"]}
        filled["metadata"] = {**meta, "annotations": annotations}
        return filled

    # -- checking --------------------------------------------------------------------
    def _claims(self, token: str) -> Obj:
        parts = token.split(".")
        if len(parts) != 3:
            raise UNAUTHORIZED
        mac = hmac.new(self._key, f"{parts[0]}.{parts[1]}".encode(), hashlib.sha256).digest()
        try:
            if not hmac.compare_digest(mac, _unb64(parts[2])):
                raise UNAUTHORIZED
            claims = orjson.loads(_unb64(parts[1]))
        except ValueError:
            raise UNAUTHORIZED from None
        if not isinstance(claims, dict):
            raise UNAUTHORIZED
        return claims

    def _service_account(self, token: str) -> UserInfo:
        claims = self._claims(token)
        if "kubernetes.io" in claims:  # a TokenRequest token: expires, bound to the SA's uid
            if int(claims.get("exp", 0)) < time.time():
                raise UNAUTHORIZED
            bound = claims["kubernetes.io"]
            namespace, sa_name = bound["namespace"], bound["serviceaccount"]["name"]
            sa_uid = bound["serviceaccount"]["uid"]
        else:  # a legacy Secret token: valid while its Secret exists
            prefix = "kubernetes.io/serviceaccount/"
            namespace = claims.get(prefix + "namespace", "")
            sa_name = claims.get(prefix + "service-account.name", "")
            sa_uid = claims.get(prefix + "service-account.uid", "")
            secret = self.store.try_get(
                "secrets", namespace, claims.get(prefix + "secret.name", "")
            )
            if secret is None or secret["metadata"]["uid"] != claims.get(prefix + "secret.uid"):
                raise UNAUTHORIZED
        sa = self.store.try_get("serviceaccounts", namespace, sa_name)
        if sa is None or sa["metadata"]["uid"] != sa_uid:
            raise UNAUTHORIZED
        return service_account_user(namespace, sa_name, sa_uid)
