"""WorkloadReady, rolls paced: a roll of a serving order's pods that it did not ask for waits for its class's
turn (`_rollout.RollPacer`), and a roll that finished hands the turn on."""

from __future__ import annotations

from isvc_api import Obj, Verdict

from isvc_operator._outcome import Decisions
from isvc_operator._ports import Deps
from isvc_operator._scope import OrderScope

__all__ = ["ROLL_RETRY", "pace", "templates", "waits_its_turn"]

# While a roll waits for its class's turn the order is passed again this often, besides being woken when the turn
# frees (a turn held by an order deleted meanwhile, or lapsing after ROLL_DEADLINE, wakes no one).
ROLL_RETRY = 15.0


def _group(scope: OrderScope) -> str:
    """The orders whose rolls are paced together: those of one class ("" for orders without one)."""
    return scope.order.spec.inference_service_class_name or ""


def templates(scope: OrderScope, deps: Deps, manifests: list[Obj]) -> dict[str, Obj]:
    """The order's claim templates by name: those the cluster holds, and those of this pass's manifests."""
    held = deps.cluster.owned("ResourceClaimTemplate", scope.namespace, scope.name)
    wanted = [m for m in manifests if m["kind"] == "ResourceClaimTemplate"]
    return {t["metadata"]["name"]: t for t in [*held, *wanted]}


def waits_its_turn(scope: OrderScope, deps: Deps, manifest: Obj, templates: dict[str, Obj]) -> bool:
    """Whether applying the set would recreate the pods of a serving order on the devices they hold, for a
    change it did not ask for (its class, a recipe, a module setting), while another order of its class rolls."""
    if deps.rolls is None:
        return False
    meta = manifest["metadata"]
    held = deps.cluster.cached("StatefulSet", meta["namespace"], meta["name"])
    if held is None or not deps.workload.recreates_pods(held, manifest, templates):
        return False
    if int((held.get("status") or {}).get("readyReplicas") or 0) < 1:
        return False  # it serves nothing: there is nothing to keep up
    if scope.order.metadata.generation != scope.previous.observed_generation:
        return False  # an edit of the order itself rolls at once
    return not deps.rolls.may_roll(_group(scope), scope.key)


def pace(
    scope: OrderScope,
    deps: Deps,
    d: Decisions,
    manifests: list[Obj],
    verdict: Verdict,
    waits: bool,
    set_applied: bool,
) -> Verdict:
    """A roll waiting for its turn (`waits`) says so and retries; a finished roll hands the class's turn on
    (`set_applied`: the set was written on this pass, so its roll, if any, begins now)."""
    if deps.rolls is None:
        return verdict
    group = _group(scope)
    if waits:
        d.requeue(ROLL_RETRY)
        turn = deps.rolls.turn(group)
        rolling = f" (order {turn[0]}/{turn[1]} is rolling now)" if turn is not None else ""
        what = f"class {group}" if group else "orders without a class"
        note = (
            f" A change that recreates its pods waits its turn: the {what} roll one order at a time{rolling}; "
            "the pods in place keep serving meanwhile."
        )
        return verdict.model_copy(update={"message": verdict.message + note}) if verdict.holds else verdict
    wanted = next((m for m in manifests if m["kind"] == "StatefulSet"), None)
    held = deps.cluster.cached("StatefulSet", scope.namespace, scope.name)
    if (
        set_applied
        or wanted is None
        or held is None
        or deps.workload.recreates_pods(held, wanted, templates(scope, deps, manifests))
    ):
        return verdict  # applied just now, or the cache has not seen it yet: the roll has not begun
    if verdict.holds and not deps.workload.set_rolling(held):
        d.wake.extend(deps.rolls.settled(group, scope.key))
    return verdict
