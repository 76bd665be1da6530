"""What the cluster says of the workload besides its objects: containers' output and events, read and recorded."""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

from isvc_api import MANAGER, Obj
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from isvc_operator._api import namespace_terminating
from isvc_operator._kube.discovery import REQUEST_TIMEOUT

__all__ = ["LOG_GONE_NOTICES", "Records"]

log = logging.getLogger(__name__)

# What the kubelet answers (HTTP 200, the text in place of the output) for a container instance it has
# already removed, or whose log file is gone: kubernetes v1.36.3 pkg/kubelet/kuberuntime/
# kuberuntime_container.go GetContainerLogs, and k8s.io/cri-client v0.36.3 pkg/logs/logs.go ReadLogs.
LOG_GONE_NOTICES = ("unable to retrieve container logs for ", "failed to try resolving symlinks in path ")
# Who records each refusal the controller reads (kubernetes v1.36.3: pkg/controller/statefulset
# NewStatefulSetController, pkg/controller/resourceclaim NewController, their EventSource components).
REPORTERS = {"FailedCreate": "statefulset-controller", "FailedResourceClaimCreation": "resource_claim"}


class Records:
    """Containers' output, the events controllers recorded on an object, and the controller's own events."""

    def __init__(self, core: k8s.CoreV1Api) -> None:
        self.core = core
        self._event_lock = threading.Lock()
        self._last_event = 0

    def read_log(self, namespace: str, pod: str, container: str, lines: int = 8) -> str | None:
        """The tail of a container's output, previous instance first; None when it cannot be had.

        The kubelet keeps one dead instance: while the current one has itself just exited, the one before it
        is gone and the kubelet answers 200 with a notice instead of its output; the current one's is read.
        """
        for previous in (True, False):
            try:
                text: str = self.core.read_namespaced_pod_log(
                    pod,
                    namespace,
                    container=container,
                    tail_lines=lines,
                    previous=previous,
                    _request_timeout=REQUEST_TIMEOUT,
                )
                if text and not text.startswith(LOG_GONE_NOTICES):
                    return text
            except ApiException:
                continue
        return None

    def start_log(self, namespace: str, pod: str, container: str, lines: int = 200) -> str | None:
        """The tail of the output of a container's current instance (the start under way), or None."""
        try:
            text: str = self.core.read_namespaced_pod_log(
                pod, namespace, container=container, tail_lines=lines, _request_timeout=REQUEST_TIMEOUT
            )
        except ApiException:
            return None
        return text or None

    def failed_create(self, namespace: str, kind: str, name: str, uid: str) -> str | None:
        """What the workload controller last said when the cluster refused to create a pod of that object
        (its newest FailedCreate event), read live; None when it said nothing or the events cannot be read."""
        return self.refused(namespace, kind, name, uid, "FailedCreate")

    def refused(self, namespace: str, kind: str, name: str, uid: str, reason: str) -> str | None:
        """The message of the newest event `reason` the controller that records it (REPORTERS) recorded on that
        object (this uid), read live; None when there is none or the events cannot be read.

        A user with `edit` may write events in her namespace, naming any component: only the recording
        component's are read, which stops an event written by hand but not one forged with that name; either
        way its words are only quoted in the order's own status, never acted on beyond a retry mark."""
        selector = f"involvedObject.kind={kind},involvedObject.name={name},reason={reason}"
        try:
            events = self.core.list_namespaced_event(
                namespace, field_selector=selector, _request_timeout=REQUEST_TIMEOUT
            ).items
        except ApiException as exc:
            log.warning("events of %s %s/%s not read: %s", kind, namespace, name, exc.reason)
            return None
        reporter = REPORTERS.get(reason)
        ours = [
            e
            for e in events
            if e.involved_object.uid == uid
            and (
                reporter is None
                or reporter in ((e.source.component if e.source else None), e.reporting_component)
            )
        ]
        if not ours:
            return None
        never = datetime.min.replace(tzinfo=UTC)
        newest = max(ours, key=lambda e: e.last_timestamp or e.event_time or never)
        return str(newest.message or "") or None

    def _event_time(self) -> int:
        """Nanoseconds since the epoch, strictly after the last event's: event names sort as they were made."""
        with self._event_lock:
            self._last_event = max(time.time_ns(), self._last_event + 1)
            return self._last_event

    def event(self, involved: Obj, type_: str, reason: str, message: str) -> None:
        """Record an event on an object (best effort: an event is never worth a failed pass).

        Named `<object>.<nanoseconds, hex>`, as client-go's recorder names them (tools/record makeEvent): the
        API server lists events by name, and `kubectl describe` sorts that list by lastTimestamp, which has
        whole seconds, with Go's sort.Sort; a list already in time order stays in its order, so events of one
        second are shown in the order they were made, not in the random order of generated names."""
        meta = involved["metadata"]
        made = self._event_time()
        now = datetime.fromtimestamp(made / 1e9, UTC)
        body = k8s.CoreV1Event(
            metadata=k8s.V1ObjectMeta(name=f"{meta['name']}.{made:x}", namespace=meta.get("namespace")),
            involved_object=k8s.V1ObjectReference(
                api_version=involved.get("apiVersion"),
                kind=involved.get("kind"),
                name=meta["name"],
                namespace=meta.get("namespace"),
                uid=meta.get("uid"),
            ),
            reason=reason,
            message=message[:1024],
            type=type_,
            first_timestamp=now,
            last_timestamp=now,
            count=1,
            source=k8s.V1EventSource(component=MANAGER),
        )
        try:
            self.core.create_namespaced_event(
                meta.get("namespace") or "default", body, _request_timeout=REQUEST_TIMEOUT
            )
        except ApiException as exc:
            if namespace_terminating(exc):  # the namespace goes, with the object the event was about
                log.debug("event %s on %s not recorded: its namespace is being deleted", reason, meta["name"])
                return
            log.warning("event %s on %s not recorded: %s", reason, meta["name"], exc.reason)
