"""The operator's view of the cluster (the Cluster port): the caches, live reads, and writes."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping
from typing import Any

from isvc_api import API_VERSION, MANAGER, Obj
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError

from isvc_operator._kube.caches import Caches
from isvc_operator._kube.discovery import REQUEST_TIMEOUT, CountedClient, Discovery
from isvc_operator._kube.records import Records

__all__ = ["APPLY_CONTENT_TYPE", "KubeCluster", "apply_body"]

log = logging.getLogger(__name__)

# A character beyond the Basic Multilingual Plane as json.dumps escapes it: a UTF-16 surrogate pair, after an
# even number of backslashes (an odd number would make the first backslash a literal one).
_SURROGATE_PAIR = re.compile(r"(?<!\\)((?:\\\\)*)\\u(d[89ab][0-9a-f]{2})\\u(d[c-f][0-9a-f]{2})")


def apply_body(manifest: Obj) -> bytes:
    """The manifest as the YAML a server-side apply is read as: JSON, but with a character beyond the BMP as a
    YAML `\\U` escape. The API server's YAML decoder refuses the surrogate pairs json.dumps writes for them
    ("found invalid Unicode character escape code"), so one such character in a user's model name, echoed
    into a condition message, made every status write of the order fail (the hostile-input suite found it)."""

    def scalar(m: re.Match[str]) -> str:
        high, low = int(m.group(2), 16), int(m.group(3), 16)
        return f"{m.group(1)}\\U{0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00):08x}"

    return _SURROGATE_PAIR.sub(scalar, json.dumps(manifest)).encode()


# A server-side apply's body is sent as the bytes `apply_body` makes, whatever the kubernetes client's version:
# before 37 its REST layer serialises the body as JSON for exactly `application/apply-patch+yaml` (bytes then
# raise TypeError) and passes bytes through for any other non-JSON type, and from 37 on it passes bytes through
# for every YAML type. With a parameter the type is no longer that exact string, and the API server drops a
# patch's content-type parameters before reading it (apiserver `handlers/patch.go`). Every other write sends a
# dict or a list, which every version serialises with json.dumps (37.0.3 raises on bytes for JSON types).
APPLY_CONTENT_TYPE = "application/apply-patch+yaml; charset=utf-8"


class KubeCluster(Caches, Records):
    """Cached reads through informers where one holds the kind, live reads of orders, plans and Secrets, writes
    by server-side apply, and what the cluster records (containers' output, events)."""

    def __init__(
        self,
        api: k8s.ApiClient,
        catalog_enabled: bool = True,
        requests: Callable[[str, str], None] | None = None,
        resync: float | None = None,
    ) -> None:
        self.api = api
        self.dyn = CountedClient(api, requests)
        self.discovery = Discovery(self.dyn)
        Caches.__init__(self, self.discovery, catalog_enabled, resync)
        Records.__init__(self, k8s.CoreV1Api(api))

    # ---- live reads

    def order(self, namespace: str, name: str) -> Obj | None:
        """An order, read live: a pass starts from what the API server holds."""
        return self.get(API_VERSION, "InferenceService", namespace, name)

    def klass(self, name: str) -> Obj | None:
        """A class from the cache; read live until the cache has synced (a standby answering estimates)."""
        if not self.classes.synced.is_set():
            return self.get(API_VERSION, "InferenceServiceClass", None, name)
        return self.classes.get(None, name)

    def launch_plan(self, namespace: str, name: str) -> Obj | None:
        """An order's LaunchPlan, read live."""
        return self.get(API_VERSION, "LaunchPlan", namespace, name)

    def get(self, api_version: str, kind: str, namespace: str | None, name: str) -> Obj | None:
        """A live read; None when the object (or its kind) does not exist."""
        try:
            resource = self.discovery.resource(api_version, kind)
            got: Obj = resource.get(name=name, namespace=namespace).to_dict()
            return got
        except ResourceNotFoundError:
            return None
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def served(self, api_version: str, kind: str) -> bool:
        """Whether the API server serves the kind (discovery)."""
        return self.discovery.served(api_version, kind)

    def get_secret(self, namespace: str, name: str) -> Obj | None:
        """A Secret read live: no Secret's data is cached (least privilege in memory); only their metadata
        is watched, to pass the orders that name one when it changes."""
        return self.get("v1", "Secret", namespace, name)

    # ---- writes

    def apply(self, manifest: Obj, dry_run: bool = False) -> Obj:
        """Server-side apply with the one field manager, taking ownership of conflicting fields; `dry_run`:
        what the object would be (the API server's defaults and admission included), nothing written."""
        resource = self.discovery.resource(manifest["apiVersion"], manifest["kind"])
        return self._apply(resource, manifest, dry_run)

    def apply_status(self, manifest: Obj) -> Obj:
        """Server-side apply of the status subresource."""
        resource = self.discovery.resource(manifest["apiVersion"], manifest["kind"])
        return self._apply(resource.subresources["status"], manifest)

    def _apply(self, resource: Any, manifest: Obj, dry_run: bool = False) -> Obj:
        meta = manifest["metadata"]
        namespace = meta.get("namespace") if resource.namespaced else None
        path = resource.path(name=meta["name"], namespace=namespace)
        extra = {"dry_run": "All"} if dry_run else {}
        out: Obj = self.dyn.request(
            "patch",
            path,
            body=apply_body(manifest),
            content_type=APPLY_CONTENT_TYPE,
            field_manager=MANAGER,
            force_conflicts=True,
            **extra,
        ).to_dict()
        return out

    def patch(self, manifest: Obj, ops: list[Obj], dry_run: bool = False) -> Obj:
        """A JSON patch of the object `manifest` names (a child restored whole)."""
        resource = self.discovery.resource(manifest["apiVersion"], manifest["kind"])
        meta = manifest["metadata"]
        namespace = meta.get("namespace") if resource.namespaced else None
        extra = {"dry_run": "All"} if dry_run else {}
        out: Obj = self.dyn.request(
            "patch",
            resource.path(name=meta["name"], namespace=namespace),
            body=ops,
            content_type="application/json-patch+json",
            field_manager=MANAGER,
            **extra,
        ).to_dict()
        return out

    def lease(self, namespace: str, name: str) -> Obj | None:
        """A coordination Lease, read live."""
        return self.get("coordination.k8s.io/v1", "Lease", namespace, name)

    def take_lease(self, manifest: Obj) -> bool:
        """Replace a Lease at the resourceVersion it was read at, or create it when it had none; False on 409."""
        resource = self.discovery.resource(manifest["apiVersion"], manifest["kind"])
        meta = manifest["metadata"]
        try:
            if meta.get("resourceVersion"):
                resource.replace(body=manifest, namespace=meta["namespace"])
            else:
                resource.create(body=manifest, namespace=meta["namespace"])
        except ApiException as exc:
            if exc.status == 409:
                return False
            raise
        return True

    def create(self, manifest: Obj) -> Obj:
        """Create an object; an existing one is returned as it is (never overwritten)."""
        resource = self.discovery.resource(manifest["apiVersion"], manifest["kind"])
        meta = manifest["metadata"]
        try:
            out: Obj = resource.create(body=manifest, namespace=meta.get("namespace")).to_dict()
            return out
        except ApiException as exc:
            if exc.status != 409:
                raise
        existing = self.get(manifest["apiVersion"], manifest["kind"], meta.get("namespace"), meta["name"])
        assert existing is not None
        return existing

    def annotate(
        self, api_version: str, kind: str, namespace: str, name: str, annotations: dict[str, str]
    ) -> None:
        """Set annotations on an object by a merge patch of its metadata, under the controller's field manager;
        an object gone meanwhile is left alone."""
        try:
            resource = self.discovery.resource(api_version, kind)
            self.dyn.request(
                "patch",
                resource.path(name=name, namespace=namespace),
                body={"metadata": {"annotations": annotations}},
                content_type="application/merge-patch+json",
                field_manager=MANAGER,
            )
        except ApiException as exc:
            if exc.status != 404:
                raise

    def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> None:
        """Delete an object; a missing one is already deleted."""
        try:
            resource = self.discovery.resource(api_version, kind)
            resource.delete(name=name, namespace=namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def user_may(
        self,
        username: str,
        uid: str,
        groups: tuple[str, ...],
        extra: Mapping[str, tuple[str, ...]],
        verb: str,
        resource: str,
        namespace: str,
        name: str,
    ) -> bool:
        """A SubjectAccessReview of a user the API server vouched for; False when it cannot be asked."""
        review = k8s.V1SubjectAccessReview(
            spec=k8s.V1SubjectAccessReviewSpec(
                user=username,
                uid=uid or None,
                groups=list(groups),
                extra={k: list(v) for k, v in extra.items()} or None,
                resource_attributes=k8s.V1ResourceAttributes(
                    verb=verb, resource=resource, namespace=namespace, name=name
                ),
            )
        )
        try:
            answer = k8s.AuthorizationV1Api(self.api).create_subject_access_review(
                review, _request_timeout=REQUEST_TIMEOUT
            )
        except Exception as exc:  # unreachable or forbidden: not allowed
            log.warning(
                "access review for %s (%s %s %s/%s) failed: %s",
                username,
                verb,
                resource,
                namespace,
                name,
                exc,
            )
            return False
        return bool(answer.status and answer.status.allowed)
