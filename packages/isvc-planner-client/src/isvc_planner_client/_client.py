"""A typed client of the planner service, for the operator."""

from __future__ import annotations

import os
import ssl
from collections.abc import Generator
from pathlib import Path
from types import TracebackType

import httpx
from isvc_api import Placement, Refusal
from pydantic import ValidationError

from isvc_planner_client._errors import PlannerProtocolError, PlannerUnavailableError
from isvc_planner_client._models import (
    HoldRequest,
    HoldVerdict,
    OrderRef,
    PlanManyRequest,
    PlanManyResponse,
    PlanRequest,
    PlanResponse,
    Released,
    Reservation,
    Reservations,
    RoomChange,
)

__all__ = ["SERVICE_ACCOUNT_TOKEN", "PlannerClient", "TokenFileAuth"]

#: Where a pod finds its ServiceAccount token (kubelet rotates it in place).
SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


class TokenFileAuth(httpx.Auth):
    """`Authorization: Bearer <token>` from a file, read again whenever the file changes (rotation)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._seen: tuple[int, int, int] | None = None
        self._token = ""

    def token(self) -> str:
        """The file's token; PlannerUnavailableError (temporary) while it cannot be read."""
        try:
            st = self.path.stat()  # follows the kubelet's ..data symlink to the current file
            seen = (st.st_ino, st.st_mtime_ns, st.st_size)
            if seen != self._seen:
                self._token = self.path.read_text().strip()
                self._seen = seen
        except OSError as error:
            raise PlannerUnavailableError(
                f"cannot read the planner token file {self.path}: {error}"
            ) from error
        return self._token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token()}"
        yield request


class PlannerClient:
    """Calls the planner's /v1 routes; connection errors, timeouts and 5xx are temporary.

    The planner answers only its allowed caller (issue 14): each request carries the bearer token read
    from `token_file` (the controller passes its ServiceAccount token, `SERVICE_ACCOUNT_TOKEN` in a pod);
    None sends no token. A refusal of the token (401, 403) is permanent until the token changes. Over
    HTTPS the planner's certificate is checked against `ca_file` (the chart's authority), else the
    system's trust store.
    """

    def __init__(
        self,
        base_url: str,
        timeout: float = 10.0,
        transport: httpx.BaseTransport | None = None,
        token_file: str | os.PathLike[str] | None = None,
        ca_file: str | os.PathLike[str] | None = None,
    ) -> None:
        auth = TokenFileAuth(token_file) if token_file is not None else None
        verify: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=ca_file) if ca_file is not None else True
        )
        self._http = httpx.Client(
            base_url=base_url, timeout=timeout, transport=transport, auth=auth, verify=verify
        )

    def plan(self, request: PlanRequest) -> PlanResponse:
        """Plan one order."""
        body = self._post("/v1/plan", request.model_dump(mode="json", by_alias=True, exclude_none=True))
        try:
            return PlanResponse.model_validate(body)
        except ValidationError as error:
            raise PlannerProtocolError(f"planner answered something that is not a plan: {error}") from error

    def plan_many(self, requests: list[PlanRequest]) -> list[PlanResponse]:
        """Plan orders that wait together; one answer per request, in order."""
        payload = PlanManyRequest(orders=requests).model_dump(mode="json", by_alias=True, exclude_none=True)
        body = self._post("/v1/plans", payload)
        try:
            answers = PlanManyResponse.model_validate(body).answers
        except ValidationError as error:
            raise PlannerProtocolError(f"planner answered something that is not plans: {error}") from error
        if len(answers) != len(requests):
            raise PlannerProtocolError(f"planner answered {len(answers)} plans for {len(requests)} orders")
        return answers

    def release(self, order: OrderRef) -> bool:
        """Drop the reservation of an order that will not take it; True when one was held."""
        body = self._post("/v1/release", order.model_dump(mode="json", by_alias=True, exclude_none=True))
        try:
            return Released.model_validate(body).released
        except ValidationError as error:
            raise PlannerProtocolError(f"planner answered no release: {error}") from error

    def judge(self, placement: Placement) -> Refusal | None:
        """LaunchPlanNotAPlacement for a placement that is not one, else None."""
        body = self._post("/v1/judge", placement.model_dump(mode="json", by_alias=True, exclude_none=True))
        if body is None:
            return None
        try:
            return Refusal.model_validate(body)
        except ValidationError as error:
            raise PlannerProtocolError(f"planner answered no verdict: {error}") from error

    def hold(self, order: OrderRef, placement: Placement) -> HoldVerdict:
        """Judge the plan an order holds: not a placement (LaunchPlanNotAPlacement), or lost to holders
        ranked above it, or standing."""
        request = HoldRequest(order=order, placement=placement)
        body = self._post("/v1/hold", request.model_dump(mode="json", by_alias=True, exclude_none=True))
        try:
            return HoldVerdict.model_validate(body)
        except ValidationError as error:
            raise PlannerProtocolError(f"planner answered no verdict on the hold: {error}") from error

    def room_changed(self, after: str | None, wait: float) -> str:
        """Block until the planner's ledger may have made room since `after` (None: answer at once) or
        `wait` seconds pass; the token to wait on next."""
        return self.room_change(after, wait).epoch

    def room_change(self, after: str | None, wait: float) -> RoomChange:
        """As `room_changed`, with the orders stranded on hardware out of service at the answer."""
        params = {"wait": f"{wait:g}"} | ({"after": after} if after is not None else {})
        try:
            response = self._http.get("/v1/room", params=params, timeout=wait + 15.0)
        except httpx.TimeoutException as error:
            raise PlannerUnavailableError(f"planner timed out on /v1/room: {error}") from error
        except httpx.TransportError as error:
            raise PlannerUnavailableError(f"planner unreachable on /v1/room: {error}") from error
        body = self._answer("/v1/room", response)
        try:
            return RoomChange.model_validate(body)
        except ValidationError as error:
            raise PlannerProtocolError(f"planner answered no room token: {error}") from error

    def reservations(self) -> list[Reservation]:
        """What the planner holds for plans no claim shows yet, one entry per order (read only)."""
        body = self._call("GET", "/v1/reservations", None)
        try:
            return Reservations.model_validate(body).reservations
        except ValidationError as error:
            raise PlannerProtocolError(f"planner answered no reservations: {error}") from error

    def _post(self, path: str, payload: object) -> object:
        return self._call("POST", path, payload)

    def _call(self, method: str, path: str, payload: object) -> object:
        try:
            response = (
                self._http.post(path, json=payload) if method == "POST" else self._http.request(method, path)
            )
        except httpx.TimeoutException as error:
            raise PlannerUnavailableError(f"planner timed out on {path}: {error}") from error
        except httpx.TransportError as error:
            raise PlannerUnavailableError(f"planner unreachable on {path}: {error}") from error
        return self._answer(path, response)

    @staticmethod
    def _answer(path: str, response: httpx.Response) -> object:
        if response.status_code >= 500 or response.status_code == 429:  # 429: too many new tokens at once
            raise PlannerUnavailableError(
                f"planner failed on {path}: HTTP {response.status_code} {response.text[:200]}"
            )
        if response.status_code >= 400:
            raise PlannerProtocolError(
                f"planner refused {path}: HTTP {response.status_code} {response.text[:200]}"
            )
        try:
            return response.json()
        except ValueError as error:
            raise PlannerUnavailableError(f"planner answered no JSON on {path}") from error

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> PlannerClient:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
