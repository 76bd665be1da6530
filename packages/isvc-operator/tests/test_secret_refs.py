"""Secrets are watched by metadata and answered from an index: a Secret's event passes exactly the orders
that name it (no cluster: informers stand in)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from isvc_operator import ClassReconciler, Controller, KubeCluster, OrderReconciler, PassResult
from isvc_operator._secret_refs import SecretRefs, secrets_named
from prometheus_client import CollectorRegistry

from .test_controller_wiring import Informer, drain

Obj = dict[str, Any]


def order(namespace: str, name: str, secret: str | None = None) -> Obj:
    model: Obj = {"src": "HuggingFace", "ref": {"name": "meta-llama/Llama-3.1-8B-Instruct"}}
    if secret is not None:
        model["authSecretRef"] = {"name": secret, "key": "token"}
    return {
        "metadata": {"namespace": namespace, "name": name, "generation": 1},
        "spec": {"model": model},
        "status": {"observedGeneration": 1},
    }


def secret(namespace: str, name: str) -> Obj:
    """A Secret as the metadata watch delivers it: a PartialObjectMetadata, no data."""
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"namespace": namespace, "name": name, "resourceVersion": "7"},
    }


class SecretInformer(Informer):
    """A store-less informer: watch events, and a call after each relist."""

    def __init__(self) -> None:
        super().__init__()
        self.relisted: list[Any] = []

    def add_relist_handler(self, handler: Any) -> None:
        self.relisted.append(handler)

    def relist(self) -> None:
        for handler in self.relisted:
            handler()


def controller() -> tuple[Controller, Any, CollectorRegistry]:
    names = (
        "orders",
        "classes",
        "plans",
        "statefulsets",
        "deployments",
        "pods",
        "claims",
        "ingresses",
        "services",
        "autoscalers",
        "priority_classes",
    )
    kube = SimpleNamespace(**{n: Informer() for n in names}, secrets=SecretInformer())
    registry = CollectorRegistry()
    c = Controller(
        cast(KubeCluster, kube), cast(OrderReconciler, None), cast(ClassReconciler, None), registry=registry
    )
    return c, kube, registry


def test_an_order_names_its_model_token_secret_and_its_endpoint_token_secret() -> None:
    assert secrets_named(order("ns", "chat", "hf")) == {("ns", "hf"), ("ns", "chat-auth")}
    assert secrets_named(order("ns", "chat")) == {("ns", "chat-auth")}


def test_the_index_follows_edits_and_deletes_of_orders() -> None:
    refs = SecretRefs()
    refs.on_order("ADDED", order("ns", "a", "hf"))
    refs.on_order("ADDED", order("ns", "b", "hf"))
    refs.on_order("ADDED", order("other", "c", "hf"))
    assert refs.orders("ns", "hf") == {("ns", "a"), ("ns", "b")}
    assert refs.orders("other", "hf") == {("other", "c")}
    refs.on_order("MODIFIED", order("ns", "a", "hf-2"))  # the reference changed
    assert refs.orders("ns", "hf") == {("ns", "b")}
    assert refs.orders("ns", "hf-2") == {("ns", "a")}
    refs.on_order("MODIFIED", order("ns", "b"))  # the reference removed
    assert refs.orders("ns", "hf") == set()
    assert refs.orders("ns", "b-auth") == {("ns", "b")}
    refs.on_order("DELETED", order("ns", "a", "hf-2"))
    assert refs.orders("ns", "hf-2") == set()
    assert refs.orders("ns", "a-auth") == set()
    assert refs.all() == {("ns", "b"), ("other", "c")}


def test_a_secret_event_passes_exactly_the_orders_that_name_it() -> None:
    c, kube, _ = controller()
    for o in (
        order("ns", "a", "hf"),
        order("ns", "b", "hf"),
        order("ns", "c", "other"),
        order("elsewhere", "d", "hf"),
    ):
        kube.orders.emit("ADDED", o)
    drain(c, 0.1)
    for event in ("ADDED", "MODIFIED", "DELETED"):
        kube.secrets.emit(event, secret("ns", "hf"))
        assert drain(c, 0.1) == {("ns", "a"), ("ns", "b")}, event
    kube.secrets.emit("ADDED", secret("ns", "unrelated"))
    assert drain(c, 0.1) == set()


def test_an_edited_reference_is_followed_and_a_deleted_order_is_not_passed() -> None:
    c, kube, _ = controller()
    kube.orders.emit("ADDED", order("ns", "a", "hf"))
    kube.orders.emit("MODIFIED", order("ns", "a", "hf-new"))
    drain(c, 0.1)
    kube.secrets.emit("ADDED", secret("ns", "hf"))
    assert drain(c, 0.1) == set()
    kube.secrets.emit("ADDED", secret("ns", "hf-new"))
    assert drain(c, 0.1) == {("ns", "a")}
    kube.orders.emit("DELETED", order("ns", "a", "hf-new"))
    drain(c, 0.1)
    kube.secrets.emit("MODIFIED", secret("ns", "hf-new"))
    assert drain(c, 0.1) == set()


def test_the_endpoint_token_secret_deleted_passes_its_order() -> None:
    c, kube, _ = controller()
    kube.orders.emit("ADDED", order("ns", "chat"))
    drain(c, 0.1)
    kube.secrets.emit("DELETED", secret("ns", "chat-auth"))
    assert drain(c, 0.1) == {("ns", "chat")}


def test_a_relist_of_secrets_passes_every_order_that_names_one() -> None:
    """A broken watch may have missed a Secret's deletion: no store can tell which, so all are passed."""
    c, kube, _ = controller()
    kube.orders.emit("ADDED", order("ns", "a", "hf"))
    kube.orders.emit("ADDED", order("other", "b"))
    drain(c, 0.1)
    kube.secrets.relist()
    assert drain(c, 0.1) == {("ns", "a"), ("other", "b")}


def test_timed_requeues_are_counted_by_the_orders_reason() -> None:
    c, _, registry = controller()
    answers = iter(
        [PassResult(requeue_after=15.0, reason="NoCapacity"), PassResult(reason="AuthSecretNotFound")]
    )
    c.orders = cast(OrderReconciler, SimpleNamespace(reconcile=lambda *_: next(answers)))
    c._order_pass(("ns", "a"))
    c._order_pass(("ns", "b"))
    timed = "isvc_order_timed_requeues_total"
    assert registry.get_sample_value(timed, {"reason": "NoCapacity"}) == 1
    assert registry.get_sample_value(timed, {"reason": "AuthSecretNotFound"}) is None
