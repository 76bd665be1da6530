"""The planner's HTTP API (FastAPI): plan one order or several together, judge, list reservations, health,
readiness."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from isvc_api import Placement, Refusal
from isvc_planner_client import (
    CapacityView,
    HoldRequest,
    HoldVerdict,
    OrderRef,
    PlanManyRequest,
    PlanManyResponse,
    PlanRequest,
    PlanResponse,
    Released,
    Reservations,
    RoomChange,
)
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from pydantic import BaseModel

from isvc_planner._auth import CallerCheck
from isvc_planner._inventory import Inventory
from isvc_planner._planner import Planner

__all__ = ["PlannerMetrics", "create_app"]

_T = TypeVar("_T")
_BEARER = HTTPBearer(auto_error=False, description="the token of the controller's ServiceAccount")


class PlannerMetrics:
    """What the planner answers: each plan's outcome, reason and device class, and how long it took.

    The module's alerts and dashboard read these (module/monitoring/): the share of refused plans, the
    device classes orders are planned on.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.plans = Counter(
            "isvc_planner_plans",
            "Plan answers, by outcome (Placed or Refused), refusal reason and device class.",
            ["outcome", "reason", "device_class"],
            registry=registry,
        )
        self.duration = Histogram(
            "isvc_planner_plan_duration_seconds",
            "Time one request took, by endpoint (plan, plans, hold; room: how long a long poll waited).",
            ["endpoint"],
            registry=registry,
        )
        self.disagreements = Counter(
            "isvc_planner_scheduler_disagreements",
            "Claims kube-scheduler refused on devices where the ledger saw room, each counted once when "
            "learned (0 while the ledger counts as the scheduler does).",
            registry=registry,
        )
        self.solver = Counter(
            "isvc_planner_solver_runs",
            "Solver runs for orders waiting together, by outcome: optimal (proven), better (more orders than "
            "the search, not proven), limit (nothing better within the budget), failed, stale (the ledger "
            "changed meanwhile); all but the first two answer with the search's packing.",
            ["outcome"],
            registry=registry,
        )
        self.synced = Gauge(
            "isvc_planner_inventory_synced",
            "1 once the inventory has listed every kind it watches, else 0.",
            registry=registry,
        )

    def answered(self, response: PlanResponse) -> None:
        """Count one answer."""
        if response.placement is not None:
            self.plans.labels(
                outcome="Placed", reason="", device_class=response.placement.device_class_name or ""
            ).inc()
        else:
            reason = response.refusal.reason.value if response.refusal is not None else ""
            self.plans.labels(outcome="Refused", reason=reason, device_class="").inc()


def _json(answer: BaseModel) -> Response:
    """An answer serialized once, as its response model declares it (by alias, nulls left out): FastAPI
    would validate the model it was just given again before serializing it."""
    return Response(answer.model_dump_json(by_alias=True, exclude_none=True), media_type="application/json")


def create_app(
    planner: Planner, registry: CollectorRegistry | None = None, *, caller: CallerCheck
) -> FastAPI:
    """The ASGI app serving one planner and its inventory; metrics go to `registry` (fresh if absent).

    `/v1/*` answers only callers `caller` lets through (401 without a valid token, 403 for anyone else);
    `/healthz` and `/readyz` are open. No `/docs` or `/openapi.json` at run time: the description is
    `python -m isvc_planner openapi` (issue 14).
    """
    app = FastAPI(
        title="isvc resource planner",
        version="0.1.0",
        description="Places inference orders on DRA devices and estimates what they need.",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        # Its metrics are Prometheus's (PlannerMetrics); FastAPI's OpenTelemetry hooks would look for a
        # provider on every request.
        telemetry={"tracing": False, "metrics": False, "logs": False},
    )

    inventory: Inventory = planner.inventory
    v1 = APIRouter(prefix="/v1", dependencies=_guards(caller, inventory))
    metrics = PlannerMetrics(registry if registry is not None else CollectorRegistry())
    metrics.synced.set_function(lambda: 1.0 if inventory.synced else 0.0)
    planner.on_disagreement = metrics.disagreements.inc
    planner.on_solver = lambda outcome: metrics.solver.labels(outcome=outcome).inc()
    _plan_routes(v1, planner, metrics)
    _ledger_routes(v1, planner, metrics)
    app.include_router(v1)
    _probes(app, inventory)
    return app


def _guards(caller: CallerCheck, inventory: Inventory) -> list[Any]:
    """What every `/v1` call passes first: a caller `caller` lets through, then a ledger that has listed."""

    async def allowed_caller(
        credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_BEARER)],
    ) -> str:
        # A token reviewed lately is answered here; only a review (a call to the API server) takes a thread.
        token = credentials.credentials if credentials is not None else None
        verdict = caller.known(token)
        if verdict is None:
            verdict = await run_in_threadpool(caller.verdict, token)
        if verdict.status != 200:
            headers = {"WWW-Authenticate": "Bearer"} if verdict.status == 401 else None
            raise HTTPException(verdict.status, verdict.detail, headers=headers)
        # Then a ledger that has listed every kind: one that has not (a restart) would place on what plans
        # or claims hold. One dependency for both: each costs every request.
        if not inventory.synced:
            raise HTTPException(503, "the inventory has not listed every kind yet")
        return verdict.username or ""

    return [Depends(allowed_caller)]


async def _promptly(inventory: Inventory, call: Callable[[], _T]) -> _T:
    """`call()` (one order's plan or release: a fraction of a millisecond under the ledger's lock) on the
    event loop when the lock is free, where a hand-off to a worker thread and back would cost more than
    the call; in a thread when a watch holds the lock (a listing), so the loop never waits for it."""
    ran = inventory.at_once(call)
    return ran[0] if ran else await run_in_threadpool(call)


def _plan_routes(v1: APIRouter, planner: Planner, metrics: PlannerMetrics) -> None:
    """Plan one order or several, release a reservation, judge a held plan."""
    inventory = planner.inventory

    @v1.post(
        "/plan", response_model=PlanResponse, response_model_exclude_none=True, response_model_by_alias=True
    )
    async def plan(request: PlanRequest) -> Response:
        """Plan one order: a placement with estimates, or a refusal; orders to release first."""
        started = time.monotonic()
        response = await _promptly(inventory, lambda: planner.plan(request))
        metrics.duration.labels(endpoint="plan").observe(time.monotonic() - started)
        metrics.answered(response)
        return _json(response)

    @v1.post(
        "/plans",
        response_model=PlanManyResponse,
        response_model_exclude_none=True,
        response_model_by_alias=True,
    )
    def plan_many(request: PlanManyRequest) -> Response:
        """Plan orders that wait together: placed jointly so that the most of them fit."""
        started = time.monotonic()
        answers = planner.plan_many(request.orders)
        metrics.duration.labels(endpoint="plans").observe(time.monotonic() - started)
        for answer in answers:
            metrics.answered(answer)
        return _json(PlanManyResponse(answers=answers))

    @v1.post("/release", response_model=Released, response_model_by_alias=True)
    async def release(order: OrderRef) -> Released:
        """Drop the reservation of an order that will not take it; idempotent."""
        return Released(
            released=await _promptly(inventory, lambda: planner.release(order.namespace, order.name))
        )

    @v1.post(
        "/hold", response_model=HoldVerdict, response_model_exclude_none=True, response_model_by_alias=True
    )
    def hold(request: HoldRequest) -> HoldVerdict:
        """Judge the plan an order holds: not a placement, lost to holders ranked above it, or standing; and
        where orders of higher priority hold the room it needs (preemption, or growth blocked by priority)."""
        started = time.monotonic()
        # Hardware out of service first: a plan naming a device that is gone is replanned, never judged as a
        # placement against what is left (its memory may be more than any remaining device carries).
        gone = planner.gone(request.order.namespace, request.order.name, request.placement)
        refusal = None if gone else planner.judge(request.placement)
        if gone:
            verdict = HoldVerdict(gone=gone)
        elif refusal is not None:
            verdict = HoldVerdict(refusal=refusal)
        else:
            ns, name = request.order.namespace, request.order.name
            verdict = HoldVerdict(
                lost=planner.standing(ns, name), outranked=planner.outranked(ns, name, request.placement)
            )
        metrics.duration.labels(endpoint="hold").observe(time.monotonic() - started)
        return verdict


def _ledger_routes(v1: APIRouter, planner: Planner, metrics: PlannerMetrics) -> None:
    """What the ledger tells: room that appeared, reservations, whether a placement is one."""
    inventory = planner.inventory
    instance = uuid.uuid4().hex[:12]  # a restarted planner's tokens never match an older one's

    @v1.get("/room", response_model=RoomChange, response_model_by_alias=True)
    def room(
        after: Annotated[str | None, Query(description="The token of the last answer.")] = None,
        wait: Annotated[float, Query(ge=0, le=900, description="Seconds to wait for a change.")] = 0.0,
    ) -> RoomChange:
        """Answer once room may have appeared since `after` (a holding released or smaller, a pool
        published, a class, node or priority changed), or after `wait` seconds: the waiting room's wake-up."""
        seen = None
        if after is not None and after.startswith(f"{instance}:"):
            try:
                seen = int(after.split(":", 1)[1])
            except ValueError:
                seen = None
        started = time.monotonic()
        freed = inventory.freed if seen is None else inventory.wait_freed(seen, wait)
        metrics.duration.labels(endpoint="room").observe(time.monotonic() - started)
        stranded = [OrderRef(namespace=ns, name=n) for ns, n in inventory.stranded()]
        return RoomChange(epoch=f"{instance}:{freed}", stranded=stranded)

    @v1.get(
        "/reservations",
        response_model=Reservations,
        response_model_exclude_none=True,
        response_model_by_alias=True,
    )
    def reservations() -> Reservations:
        """What is held for plans no claim shows yet, per order: devices, age, time left (read only)."""
        return planner.reservations()

    @v1.get("/capacity", response_model=CapacityView, response_model_by_alias=True)
    def capacity() -> Response:
        """Every published device as the ledger counts it: free and held units, holders (read only)."""
        return _json(planner.capacity())

    @v1.post("/judge", response_model=Refusal | None, response_model_by_alias=True)
    def judge(placement: Placement) -> Refusal | None:
        """LaunchPlanNotAPlacement when a stored placement is not a placement, else null."""
        return planner.judge(placement)


def _probes(app: FastAPI, inventory: Inventory) -> None:
    """`/healthz` and `/readyz`, open to anyone."""

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        """The process answers."""
        return {"status": "ok"}

    @app.get("/readyz")
    def readyz(response: Response) -> dict[str, str]:
        """Ready once the inventory has listed every kind it watches."""
        if not inventory.synced:
            response.status_code = 503
            return {"status": "inventory not synced"}
        return {"status": "ok"}
