"""The planner's HTTP API (FastAPI): plan one order or several together, judge, health, readiness."""

from __future__ import annotations

from fastapi import FastAPI, Response
from isvc_api import Placement, Refusal
from isvc_planner_client import (
    OrderRef,
    PlanManyRequest,
    PlanManyResponse,
    PlanRequest,
    PlanResponse,
    Released,
)

from isvc_planner._inventory import Inventory
from isvc_planner._planner import Planner, judge_plan

__all__ = ["create_app"]


def create_app(planner: Planner) -> FastAPI:
    """The ASGI app serving one planner and its inventory."""
    app = FastAPI(
        title="isvc resource planner",
        version="0.1.0",
        description="Places inference orders on DRA devices and estimates what they need.",
    )
    inventory: Inventory = planner.inventory

    @app.post("/v1/plan", response_model=PlanResponse, response_model_exclude_none=True,
              response_model_by_alias=True)
    def plan(request: PlanRequest) -> PlanResponse:
        """Plan one order: a placement with estimates, or a refusal; orders to release first."""
        return planner.plan(request)

    @app.post("/v1/plans", response_model=PlanManyResponse, response_model_exclude_none=True,
              response_model_by_alias=True)
    def plan_many(request: PlanManyRequest) -> PlanManyResponse:
        """Plan orders that wait together: placed jointly so that the most of them fit."""
        return PlanManyResponse(answers=planner.plan_many(request.orders))

    @app.post("/v1/release", response_model=Released, response_model_by_alias=True)
    def release(order: OrderRef) -> Released:
        """Drop the reservation of an order that will not take it; idempotent."""
        return Released(released=planner.release(order.namespace, order.name))

    @app.post("/v1/judge", response_model=Refusal | None, response_model_by_alias=True)
    def judge(placement: Placement) -> Refusal | None:
        """LaunchPlanNotAPlacement when a stored placement is not a placement, else null."""
        return judge_plan(placement, inventory)

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

    return app
