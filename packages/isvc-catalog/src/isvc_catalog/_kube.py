"""The one module that talks to Kubernetes: reads catalog objects through an ApiClient."""

from __future__ import annotations

import json
from typing import Any

import urllib3
from isvc_api import CatalogKind
from kubernetes import client

from isvc_catalog._catalog import CATALOG_GROUP, CATALOG_VERSION, PLURALS, Absent
from isvc_catalog._errors import CatalogLookupError

__all__ = ["KubeCatalogApi", "classify_not_found"]


def classify_not_found(body: str | bytes | None, name: str) -> Absent:
    """Tell a missing object from a kind the API server does not serve, by the 404 body.

    A missing object answers with a Status whose details name it; an unserved resource type answers
    with a plain "404 page not found" (or a Status without details).
    """
    try:
        status = json.loads(body or b"")
    except ValueError:
        return Absent.KIND
    details = status.get("details") if isinstance(status, dict) else None
    if isinstance(details, dict) and details.get("name") == name:
        return Absent.OBJECT
    return Absent.KIND


class KubeCatalogApi:
    """CatalogApi over the official client; 404s are classified, other failures are temporary."""

    def __init__(self, api_client: client.ApiClient, *, timeout: float = 10.0) -> None:
        self._api = client.CustomObjectsApi(api_client)
        self._auth = client.AuthorizationV1Api(api_client)
        self._timeout = timeout

    def namespace_may_read(self, reader: str, kind: CatalogKind, name: str, namespace: str) -> bool:
        """A SubjectAccessReview for the ServiceAccounts of namespace `reader`; failures are temporary."""
        review = client.V1SubjectAccessReview(
            spec=client.V1SubjectAccessReviewSpec(
                user=f"system:serviceaccount:{reader}:default",
                groups=["system:serviceaccounts", f"system:serviceaccounts:{reader}", "system:authenticated"],
                resource_attributes=client.V1ResourceAttributes(
                    group=CATALOG_GROUP, resource=PLURALS[kind], verb="get", namespace=namespace, name=name
                ),
            )
        )
        try:
            answer = self._auth.create_subject_access_review(review, _request_timeout=self._timeout)
        except (client.ApiException, urllib3.exceptions.HTTPError, OSError) as exc:
            raise CatalogLookupError(
                f"Asking whether namespace {reader} may read {PLURALS[kind]} {namespace}/{name} failed "
                f"({type(exc).__name__}); the next pass asks again."
            ) from None
        return bool(answer.status and answer.status.allowed)

    def __repr__(self) -> str:
        return "KubeCatalogApi()"

    def get(self, kind: CatalogKind, name: str, namespace: str | None) -> dict[str, Any] | Absent:
        """The object, Absent.OBJECT or Absent.KIND; raises CatalogLookupError when the call fails."""
        plural = PLURALS[kind]
        what = f"{plural}.{CATALOG_GROUP} {namespace + '/' if namespace else ''}{name}"
        try:
            if namespace is None:
                obj = self._api.get_cluster_custom_object(
                    CATALOG_GROUP, CATALOG_VERSION, plural, name, _request_timeout=self._timeout
                )
            else:
                obj = self._api.get_namespaced_custom_object(
                    CATALOG_GROUP,
                    CATALOG_VERSION,
                    namespace,
                    plural,
                    name,
                    _request_timeout=self._timeout,
                )
        except client.ApiException as exc:
            if exc.status == 404:
                return classify_not_found(exc.body, name)
            delay = 30.0 if exc.status == 429 else 10.0
            why = ""
            if exc.status in (401, 403):
                why = (
                    ": the controller may not read catalog objects, a permission the module grants "
                    "unless catalog.mode is None; an administrator's subject"
                )
            raise CatalogLookupError(
                f"Reading {what} from the Kubernetes API failed (HTTP {exc.status} {exc.reason}{why}); "
                "the next pass asks again.",
                delay=delay,
            ) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise CatalogLookupError(
                f"Reading {what} from the Kubernetes API failed ({type(exc).__name__}); "
                "the next pass asks again."
            ) from None
        if not isinstance(obj, dict):
            raise CatalogLookupError(f"The Kubernetes API answered for {what} with something not an object.")
        return obj
