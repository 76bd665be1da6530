"""A namespace's ResourceQuota refusing part of an order's workload: read from the cluster's words, judged
against the quotas as they are now.

The API server's quota admission words a refusal `<resource> "<name>" is forbidden: exceeded quota: <quota>,
requested: <k=v,…>, used: <k=v,…>, limited: <k=v,…>` (k8s.io/apiserver v0.36.3,
pkg/admission/plugin/resourcequota/controller.go; `used` and `limited` are the quota's `status.used` and
`status.hard`). The workload controllers pass those words on: the StatefulSet controller in a `FailedCreate`
event on the set (its pods and model volumes), the resourceclaim controller in a `FailedResourceClaimCreation`
event on the pod (its device claim; kubernetes v1.36.3 pkg/controller/resourceclaim/controller.go). Both retry
with a per-object backoff that grows to minutes; an update of the refused object's owner (the set) or of the
pod itself makes them retry at once, which is how a changed quota is acted on without waiting for it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from isvc_api import Reason, Verdict, parse_quantity
from pydantic import BaseModel, ConfigDict

__all__ = ["QUOTA_RETRY_ANNOTATION", "QuotaRefusal", "quota_refusal"]

# On the object the cluster retries for (the set, or a pod waiting for its claim): the quota state it was last
# asked to retry under (`<quota>@<resourceVersion>`, or `<quota>@gone`). An update is what makes the workload
# controllers retry at once; the value makes it one update per change of the quota, never one per pass.
QUOTA_RETRY_ANNOTATION = "ai.deckhouse.io/quota-retry"

_SAID = re.compile(
    r"(?:(?P<resource>[a-z0-9.-]+) \"(?P<object>[^\"]*)\" is forbidden: )?"
    r"(?P<kind>exceeded quota|failed quota|status unknown for quota): (?P<quota>[a-z0-9][a-z0-9.-]*)"
    r"(?:, requested: (?P<requested>\S*), used: (?P<used>\S*), limited: (?P<limited>\S*))?"
)
_WHAT = {
    "resourceclaims.resource.k8s.io": "device claim",
    "pods": "pod",
    "persistentvolumeclaims": "model volume",
}


def _amounts(text: str | None) -> dict[str, str]:
    """`k=v,k2=v2` as the API server prints a resource list (keys sorted, quantities never hold a comma)."""
    pairs = (part.split("=", 1) for part in (text or "").split(",") if "=" in part)
    return {key: value for key, value in pairs}


def _same(a: Any, b: Any) -> bool:
    """Two quantities are the same amount (`1Gi` and `1024Mi` are); unreadable ones compare as text."""
    try:
        return parse_quantity(str(a)) == parse_quantity(str(b))
    except (ValueError, ArithmeticError):
        return str(a) == str(b)


class QuotaRefusal(BaseModel):
    """One quota refusal as the API server worded it."""

    model_config = ConfigDict(frozen=True)

    quota: str
    kind: str  # exceeded quota | failed quota | status unknown for quota
    what: str  # what was refused: device claim, pod, model volume (or the API resource's own name)
    requested: dict[str, str]
    used: dict[str, str]
    limited: dict[str, str]
    said: str

    def held(self, quotas: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
        """The quota that refused, among the namespace's quotas as they are now (None when it is gone)."""
        return next((q for q in quotas if (q.get("metadata") or {}).get("name") == self.quota), None)

    def stands(self, quotas: Sequence[Mapping[str, Any]]) -> bool:
        """Whether the quota still says what it said: the same hard limits and use of every resource it named.

        A quota deleted, raised, or with use freed (another claim or pod gone) no longer refuses for the same
        reason, and the cluster is asked to try again. A refusal without figures (`failed quota`, `status
        unknown`) stands while the quota exists.
        """
        quota = self.held(quotas)
        if quota is None:
            return False
        if self.kind != "exceeded quota":
            return True
        status = quota.get("status") or {}
        hard, used = status.get("hard") or {}, status.get("used") or {}
        for key, limit in self.limited.items():
            if key not in hard or not _same(hard[key], limit):
                return False
            if not _same(used.get(key, "0"), self.used.get(key, "0")):
                return False
        return True

    def retry_token(self, quotas: Sequence[Mapping[str, Any]]) -> str:
        """The value of QUOTA_RETRY_ANNOTATION for the quota as it is now."""
        quota = self.held(quotas)
        version = (quota.get("metadata") or {}).get("resourceVersion") if quota is not None else None
        return f"{self.quota}@{version or 'gone'}"

    def verdict(self, namespace: str, quotas: Sequence[Mapping[str, Any]] | None) -> Verdict:
        """WorkloadError naming the quota and whose fix it is; WorkloadNotReady once the quota changed (with
        `quotas` None, the namespace's quotas are not known and the refusal stands)."""
        if quotas is not None and not self.stands(quotas):
            return Verdict.refuse(
                Reason.WORKLOAD_NOT_READY,
                (
                    f"ResourceQuota {self.quota} refused the {self.what} of the workload and has changed since; "
                    "the cluster is asked to create it again. This passes on its own when the quota now leaves "
                    "room."
                ),
            )
        figures = ""
        if self.requested:
            figures = (
                f" It asks {_listed(self.requested)} while {_listed(self.used)} is used of "
                f"{_listed(self.limited)}."
            )
        return Verdict.refuse(
            Reason.WORKLOAD_ERROR,
            (
                f"ResourceQuota {self.quota} of namespace {namespace} refuses the {self.what} of the workload."
                f"{figures} The quota is the namespace's: whoever administers namespace {namespace} raises it "
                f"(kubectl -n {namespace} edit resourcequota {self.quota}), or room is freed within it; the "
                f"order goes on as soon as the quota changes. The cluster said: {self.said}"
            ),
        )


def _listed(amounts: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(amounts.items())) or "nothing"


def quota_refusal(said: str) -> QuotaRefusal | None:
    """The quota refusal in what the cluster said (an event's message, an API error), or None."""
    match = _SAID.search(said)
    if match is None:
        return None
    resource = match.group("resource") or ""
    return QuotaRefusal(
        quota=match.group("quota"),
        kind=match.group("kind"),
        what=_WHAT.get(resource, resource or "objects"),
        requested=_amounts(match.group("requested")),
        used=_amounts(match.group("used")),
        limited=_amounts(match.group("limited")),
        said=said.strip(),
    )
