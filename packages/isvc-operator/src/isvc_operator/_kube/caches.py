"""The informers the controller keeps, one per kind it watches, and the reads a pass makes of their caches."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import isvc_catalog
from isvc_api import API_VERSION, LABEL_ORDER, Obj

from isvc_operator._kube.compact import (
    compact,
    compact_child,
    compact_claim,
    compact_host,
    compact_pod,
    compact_scaler,
)
from isvc_operator._kube.discovery import Discovery
from isvc_operator._kube.informer import HostIndex, Informer

__all__ = ["Caches"]


class Caches:
    """Every informer, by the name the controller wires its handlers to; an order's children by kind."""

    def __init__(
        self, discovery: Discovery, catalog_enabled: bool = True, resync: float | None = None
    ) -> None:
        watch = functools.partial(Informer, discovery)

        def child(api_version: str, kind: str, transform: Callable[[Obj], Obj] = compact_child) -> Informer:
            """A kind the controller makes for orders, watched by the order label."""
            return watch(api_version, kind, label_selector=LABEL_ORDER, transform=transform)

        # Only orders are replayed: a replay is a pass per order, its plan judged again by the planner.
        self.orders = watch(API_VERSION, "InferenceService", resync=resync)
        self.classes = watch(API_VERSION, "InferenceServiceClass")
        self.plans = watch(API_VERSION, "LaunchPlan")
        self.statefulsets = child("apps/v1", "StatefulSet")
        # Only to remove the Deployment an earlier version made an order's workload of (the set took over).
        self.deployments = child("apps/v1", "Deployment")
        self.pods = child("v1", "Pod", transform=compact_pod)
        self.claims = child("resource.k8s.io/v1", "ResourceClaim", transform=compact_claim)
        self.templates = child("resource.k8s.io/v1", "ResourceClaimTemplate")
        # The sets' model volumes (the StatefulSet controller makes them with the order's label), their metadata
        # only: an order made again waits until those of the earlier set are gone.
        self.volumes = child("v1", "PersistentVolumeClaim")
        self.ingresses = child("networking.k8s.io/v1", "Ingress")
        self.services = child("v1", "Service")
        self.autoscalers = child("autoscaling/v2", "HorizontalPodAutoscaler")
        self.network_policies = child("networking.k8s.io/v1", "NetworkPolicy")
        self.budgets = child("policy/v1", "PodDisruptionBudget")
        # The metrics path's own kinds, when the cluster serves them (an informer of a kind not served waits)
        self.pod_metrics = child("deckhouse.io/v1alpha1", "PodMetric")
        self.scaled_objects = child("keda.sh/v1alpha1", "ScaledObject", transform=compact)
        self.pod_monitors = child("monitoring.coreos.com/v1", "PodMonitor")
        # Every autoscaler of the cluster, by what it scales: one someone else aims at an order's set goes.
        self.scalers = watch("autoscaling/v2", "HorizontalPodAutoscaler", transform=compact_scaler)
        # Every Ingress of the cluster, by the hosts it publishes: whose an External host is.
        self.hosts = HostIndex(watch("networking.k8s.io/v1", "Ingress", transform=compact_host))
        self.priority_classes = watch("scheduling.k8s.io/v1", "PriorityClass")
        # Namespaces' quotas: a quota refusing part of an order's workload is judged against them, and a
        # change to one passes the orders of its namespace whose workload is not up.
        self.quotas = watch("v1", "ResourceQuota")
        catalog_gv = f"{isvc_catalog.CATALOG_GROUP}/{isvc_catalog.CATALOG_VERSION}"
        # The catalog objects orders name: a fix there lifts ModelNotReady / ModelNotFound at once.
        self.catalog = [watch(catalog_gv, kind) for kind in ("Model", "ClusterModel") if catalog_enabled]
        # Secrets: their metadata only, and nothing kept — an event says which Secret changed, and the
        # orders naming it are passed; a pass reads the one Secret it needs live (get_secret).
        self.secrets = watch("v1", "Secret", metadata_only=True, store=False)
        self.catalog_enabled = catalog_enabled
        self._index()

    def _index(self) -> None:
        """Every child informer by its kind, and the list of every informer."""
        self._owned = {
            i.kind: i
            for i in (
                *(
                    self.statefulsets,
                    self.deployments,
                    self.pods,
                    self.claims,
                    self.templates,
                    self.ingresses,
                    self.volumes,
                ),
                *(self.services, self.autoscalers, self.network_policies, self.budgets),
                *(self.pod_metrics, self.scaled_objects, self.pod_monitors),
            )
        }
        self.informers = [
            *(
                self.orders,
                self.classes,
                self.plans,
                *self._owned.values(),
                self.hosts.informer,
                self.scalers,
            ),
            *(self.priority_classes, self.quotas, self.secrets, *self.catalog),
        ]

    def start(self, timeout: float = 60.0) -> None:
        """Start every informer and wait until each has listed once."""
        for informer in self.informers:
            informer.start()
        deadline = time.monotonic() + timeout
        for informer in self.informers:
            if not informer.synced.wait(max(0.0, deadline - time.monotonic())):
                raise TimeoutError(f"informer for {informer.kind} did not sync")

    def stop(self) -> None:
        """Stop every informer."""
        for informer in self.informers:
            informer.stop()

    def priority_class_exists(self, name: str) -> bool:
        return self.priority_classes.get(None, name) is not None

    def priority_value(self, name: str | None) -> int:
        """The value of a PriorityClass from the cache; 0 for none or a missing one."""
        obj = self.priority_classes.get(None, name) if name else None
        return int(obj.get("value", 0)) if obj else 0

    def ingresses_naming(self, host: str) -> list[Obj]:
        """Every Ingress of the cluster that publishes `host` (name, namespace, uid, owners, creation time)."""
        return self.hosts.naming(host)

    def autoscalers_of(self, namespace: str, kind: str, names: set[str]) -> list[Obj]:
        """Every HorizontalPodAutoscaler of a namespace that scales an object of `kind` named in `names`
        (its name, owners and target)."""
        return [
            o
            for o in self.scalers.list(namespace)
            if (o.get("target") or {}).get("kind") == kind and (o.get("target") or {}).get("name") in names
        ]

    def owned(self, kind: str, namespace: str, order: str) -> list[Obj]:
        """Children of an order from the cache: objects of `kind` labelled with its name."""
        return self._owned[kind].of_order(namespace, order)

    def cached(self, kind: str, namespace: str, name: str) -> Obj | None:
        """A child of an order as the cache holds it (kinds the controller watches), or None."""
        informer = self._owned.get(kind)
        return informer.get(namespace, name) if informer is not None else None

    def quotas_in(self, namespace: str) -> list[Obj]:
        """The ResourceQuotas of a namespace, from the cache."""
        return self.quotas.list(namespace)
