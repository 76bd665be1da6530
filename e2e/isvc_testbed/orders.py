"""Orders as alice places them in e2e tests, and the classes and catalog objects the administrator adds.

One `Orders` per test: it creates orders as the namespace user, reads their status and LaunchPlan, waits for a
condition with a timeout message that shows the last status seen, and at the end deletes every order and waits
until no order, LaunchPlan or ResourceClaim of the test is left, so later tests find the capacity free. What
the administrator made for the test is undone after that, newest first.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

from isvc_api import GROUP, LABEL_ORDER, VERSION, Obj
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from isvc_testbed.helpers import ignore_404, wait_for
from isvc_testbed.module import ModuleProcesses, conditions_line, order_status

__all__ = [
    "CATALOG",
    "GROUP",
    "VERSION",
    "Obj",
    "Orders",
    "assert_refused",
    "catalog",
    "condition",
    "hf",
]

CATALOG = "ai-models.deckhouse.io"


def condition(status: Obj, type_: str) -> Obj:
    """The condition of that type, {} when absent (so `.get(...)` never raises)."""
    return next((c for c in status.get("conditions", []) if c["type"] == type_), {})


def hf(repo: str, secret: str | None = None) -> Obj:
    """spec.model for a Hugging Face repository, with the Secret holding its token when it is gated."""
    model: Obj = {"src": "HuggingFace", "ref": {"name": repo}}
    if secret is not None:
        model["authSecretRef"] = {"name": secret}
    return model


def catalog(kind: str, name: str) -> Obj:
    """spec.model for a catalog object (Model or ClusterModel)."""
    return {"src": "AIModels", "ref": {"kind": kind, "name": name}}


def assert_refused(status: Obj, type_: str, reason: str, *words: str, phase: str = "Pending") -> str:
    """Condition `type_` is False with `reason`, the order is in `phase` (Pending: it has not served;
    Degraded: the workload it had still answers) with status.reason the same, and the condition's message
    holds every one of `words`; returns that message."""
    cond = condition(status, type_)
    assert (cond.get("status"), cond.get("reason")) == ("False", reason), f"{type_}: {cond or 'absent'}"
    assert status.get("phase") == phase, f"phase {status.get('phase')!r}, want {phase}"
    assert status.get("reason") == reason, f"status.reason {status.get('reason')!r}, want {reason!r}"
    message = str(cond.get("message", ""))
    for word in words:
        assert word in message, (word, message)
    return message


class Orders:
    """The orders (as alice) and the administrator's objects one test made, deleted again by `close()`
    (or on leaving a `with` block).

    `timeout` is how long `wait_reason` and `wait_true` wait unless told otherwise.
    """

    def __init__(
        self,
        module: ModuleProcesses,
        admin: k8s.ApiClient,
        alice: k8s.ApiClient,
        namespace: str,
        timeout: float = 60.0,
    ) -> None:
        self.module = module
        self.admin_api, self.alice_api = admin, alice
        self.admin, self.alice = k8s.CustomObjectsApi(admin), k8s.CustomObjectsApi(alice)
        self.ns = namespace
        self.timeout = timeout
        self.orders: list[str] = []
        self.cleanup: list[Callable[[], object]] = []

    # ---- alice's orders

    def create(self, name: str, model: Obj, klass: str | None = None) -> str:
        """Create order `name` as alice; without `klass` it names no class."""
        spec: Obj = {"model": model}
        if klass is not None:
            spec["inferenceServiceClassName"] = klass
        self.alice.create_namespaced_custom_object(
            GROUP,
            VERSION,
            self.ns,
            "inferenceservices",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "InferenceService",
                "metadata": {"name": name},
                "spec": spec,
            },
        )
        self.orders.append(name)
        return name

    def read(self, name: str) -> Obj:
        """The whole order as alice reads it."""
        obj: Any = self.alice.get_namespaced_custom_object(GROUP, VERSION, self.ns, "inferenceservices", name)
        return dict(obj)

    def status(self, name: str) -> Obj:
        """The order's status, {} while it has none."""
        return order_status(self.alice_api, self.ns, name)

    def delete(self, name: str) -> None:
        """Delete order `name` as alice; one already gone is fine."""
        ignore_404(
            lambda: self.alice.delete_namespaced_custom_object(
                GROUP, VERSION, self.ns, "inferenceservices", name
            )
        )

    # ---- what an order holds

    def plan(self, name: str) -> Obj | None:
        """The LaunchPlan of that name, None when there is none."""
        try:
            obj: Any = self.admin.get_namespaced_custom_object(GROUP, VERSION, self.ns, "launchplans", name)
            return dict(obj)
        except ApiException as e:
            if e.status == 404:
                return None
            raise

    def events(self, name: str) -> list[tuple[str, str, str]]:
        """(type, reason, message) of the events on order `name`, as alice reads them, oldest first."""
        items: list[Any] = (
            k8s.CoreV1Api(self.alice_api)
            .list_namespaced_event(
                self.ns, field_selector=f"involvedObject.kind=InferenceService,involvedObject.name={name}"
            )
            .items
        )
        items.sort(key=lambda e: e.last_timestamp or e.event_time or e.metadata.creation_timestamp)
        return [(e.type, e.reason, e.message) for e in items]

    def wait_events(self, name: str, reason: str, timeout: float = 15) -> list[tuple[str, str, str]]:
        """The events of `reason` on order `name`, once there is one: the controller records a pass's events
        just after its status, so a test that has seen the status may still be a moment ahead of them."""
        return wait_for(
            lambda: [e for e in self.events(name) if e[1] == reason],
            timeout,
            interval=0.2,
            what=f"{name}: a {reason} event",
        )

    def templates(self, name: str) -> set[str]:
        """Names of the ResourceClaimTemplates labelled as made for order `name`."""
        items: list[Any] = (
            k8s.ResourceV1Api(self.admin_api).list_namespaced_resource_claim_template(self.ns).items
        )
        return {t.metadata.name for t in items if (t.metadata.labels or {}).get(LABEL_ORDER) == name}

    def claims(self, name: str) -> list[Any]:
        """The ResourceClaims labelled as held by order `name`."""
        items: list[Any] = k8s.ResourceV1Api(self.admin_api).list_namespaced_resource_claim(self.ns).items
        return [c for c in items if (c.metadata.labels or {}).get(LABEL_ORDER) == name]

    def pods_said(self, name: str) -> list[str]:
        """Per pod of order `name`: its node, phase, readiness and what the scheduler or kubelet last said, with
        the devices its claims hold (what a failed wait on replicas needs)."""
        core = k8s.CoreV1Api(self.admin_api)
        pods: list[Any] = core.list_namespaced_pod(self.ns, label_selector=f"{LABEL_ORDER}={name}").items
        held = {
            c.metadata.name: [r.device for r in c.status.allocation.devices.results]
            for c in self.claims(name)
            if c.status and c.status.allocation
        }
        said = []
        for pod in pods:
            conditions = {c.type: (c.status, c.reason, c.message) for c in pod.status.conditions or ()}
            claims = [c.resource_claim_name for c in pod.status.resource_claim_statuses or ()]
            said.append(
                f"{pod.metadata.name} on {pod.spec.node_name} {pod.status.phase}"
                f"{' deleting' if pod.metadata.deletion_timestamp else ''}: {conditions}; "
                f"claims {[(c, held.get(c or '')) for c in claims]}"
            )
        return said

    # ---- waiting

    def wait(self, name: str, check: Callable[[Obj], bool], timeout: float, what: str) -> Obj:
        """The order's status once `check` holds for it; on timeout the error shows the last status seen."""
        seen: list[Obj] = [{}]

        def probe() -> Obj | None:
            self.module.check()
            seen[0] = self.status(name)
            return seen[0] if seen[0] and check(seen[0]) else None

        try:
            return wait_for(probe, timeout, interval=0.5, what=f"{name}: {what}")
        except TimeoutError as e:
            last = seen[0]
            raise TimeoutError(
                f"{e}; status: {conditions_line(last)} phase {last.get('phase')}; "
                f"{[c.get('message') for c in last.get('conditions', [])]}"
            ) from None

    def wait_reason(self, name: str, type_: str, reason: str, timeout: float | None = None) -> Obj:
        """The order's status once condition `type_` carries `reason`."""
        return self.wait(
            name,
            lambda s: condition(s, type_).get("reason") == reason,
            self.timeout if timeout is None else timeout,
            f"{type_} reason {reason}",
        )

    def wait_true(self, name: str, type_: str, timeout: float | None = None) -> Obj:
        """The order's status once condition `type_` is True."""
        return self.wait(
            name,
            lambda s: condition(s, type_).get("status") == "True",
            self.timeout if timeout is None else timeout,
            f"{type_} True",
        )

    def wait_ready(self, name: str, timeout: float = 120) -> Obj:
        """The order's status once its phase is Ready."""
        return self.wait(name, lambda s: s.get("phase") == "Ready", timeout, "phase Ready")

    # ---- the administrator's objects

    def create_class(self, name: str, spec: Obj, ready: bool | None = True) -> Obj:
        """Create a class; unless `ready` is None, wait until the class controller judged it Ready=`ready`."""
        self.admin.create_cluster_custom_object(
            GROUP,
            VERSION,
            "inferenceserviceclasses",
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "InferenceServiceClass",
                "metadata": {"name": name},
                "spec": spec,
            },
        )
        self.cleanup.append(
            lambda: self.admin.delete_cluster_custom_object(GROUP, VERSION, "inferenceserviceclasses", name)
        )
        if ready is None:
            return {}
        want = ready
        return wait_for(lambda: self.class_judged(name, want), 30, what=f"class {name} judged Ready={ready}")

    def class_judged(self, name: str, ready: bool) -> Obj | None:
        """The class once its Ready condition says `ready`, else None."""
        obj: Any = self.admin.get_cluster_custom_object(GROUP, VERSION, "inferenceserviceclasses", name)
        judged = condition(obj.get("status") or {}, "Ready").get("status") == ("True" if ready else "False")
        return dict(obj) if judged else None

    def catalog_object(self, kind: str, name: str, spec: Obj, status: Obj | None) -> str:
        """Create a catalog Model (in this namespace) or ClusterModel and give it `status` unless None."""
        body = {"apiVersion": f"{CATALOG}/{VERSION}", "kind": kind, "metadata": {"name": name}, "spec": spec}
        if kind == "Model":
            self.admin.create_namespaced_custom_object(CATALOG, VERSION, self.ns, "models", body)
            self.cleanup.append(
                lambda: self.admin.delete_namespaced_custom_object(CATALOG, VERSION, self.ns, "models", name)
            )
            if status is not None:
                self.admin.patch_namespaced_custom_object_status(
                    CATALOG, VERSION, self.ns, "models", name, {"status": status}
                )
        else:
            self.admin.create_cluster_custom_object(CATALOG, VERSION, "clustermodels", body)
            self.cleanup.append(
                lambda: self.admin.delete_cluster_custom_object(CATALOG, VERSION, "clustermodels", name)
            )
            if status is not None:
                self.admin.patch_cluster_custom_object_status(
                    CATALOG, VERSION, "clustermodels", name, {"status": status}
                )
        return name

    # ---- the end of a test

    def gone(self) -> bool:
        """No order of this test, nor its LaunchPlan or claims, is left to hold capacity for later tests."""
        mine = set(self.orders)
        orders: Any = self.alice.list_namespaced_custom_object(GROUP, VERSION, self.ns, "inferenceservices")
        plans: Any = self.admin.list_namespaced_custom_object(GROUP, VERSION, self.ns, "launchplans")
        claims: list[Any] = k8s.ResourceV1Api(self.admin_api).list_namespaced_resource_claim(self.ns).items
        left = {o["metadata"]["name"] for o in orders["items"] + plans["items"]}
        left |= {(c.metadata.labels or {}).get(LABEL_ORDER) for c in claims}
        return not mine & left

    def close(self, timeout: float = 90) -> None:
        """Delete every order, wait until nothing they held is left, then undo the rest newest first."""
        for name in self.orders:
            self.delete(name)
        try:
            wait_for(self.gone, timeout, what=f"orders {self.orders}, their LaunchPlans and claims gone")
        finally:
            for undo in reversed(self.cleanup):
                ignore_404(undo)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
