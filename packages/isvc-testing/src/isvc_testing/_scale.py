"""Benchmark at fleet scale: the ledger built and kept from watch events, waiting orders answered, and
`POST /v1/plan` through the real app as the controller calls it, over HTTPS (`nox -s bench`)."""

from __future__ import annotations

import concurrent.futures
import gc
import inspect
import json
import math
import multiprocessing
import random
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

import trustme
from isvc_ledger import loading
from isvc_planner import PAGE, CallerCheck, Inventory, Planner, create_app
from isvc_planner_client import OrderRef, PlannerClient, PlanRequest

from isvc_testing._fleet import fleet_claim, fleet_device_classes, fleet_gpu, fleet_slice
from isvc_testing._models import PRODUCTS, sized_facts

__all__ = [
    "CONTROLLER_TIMEOUT",
    "build_and_events",
    "fleet",
    "http_plan",
    "isolated",
    "kept_slices",
    "resident",
    "waiting_orders",
]

_T = TypeVar("_T")

# What the controller waits for a planner answer: its PlannerClient is made with the client's default
# timeout (isvc_operator `_main.py` passes none; there is no flag for it).
CONTROLLER_TIMEOUT = float(inspect.signature(PlannerClient).parameters["timeout"].default)

CALLER = "system:serviceaccount:d8-isvc:controller"
TOKEN = "bench-controller-token"


def fleet(nodes: int, fill: float, rng: random.Random) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Slices of `nodes` × 8 GPUs (H100/A100/H200; 75 % of nodes shareable) and the allocated claims that
    take about `fill` of them: shares of 5–40 % until a shareable card is that full, whole cards with that
    probability (claims of orders, as kube-scheduler records them)."""
    slices: list[dict[str, Any]] = []
    claims: list[dict[str, Any]] = []
    for n in range(nodes):
        node = f"node-{n:05d}"
        memory = rng.choice([80, 80, 40, 141])
        shares = rng.random() < 0.75
        devices = [
            fleet_gpu(node, i, memory_gi=memory, product=PRODUCTS[memory], shares=shares) for i in range(8)
        ]
        slices.append(fleet_slice(node, devices))
        for device in devices:
            if shares:
                used = 0
                while True:
                    share = rng.randint(5, 40)
                    if used + share > fill * 100:
                        break
                    used += share
                    name = f"c{len(claims)}"
                    claims.append(fleet_claim("fill", name, name, [(node, device["name"], share)]))
            elif rng.random() < fill:
                name = f"c{len(claims)}"
                claims.append(fleet_claim("fill", name, name, [(node, device["name"], None)]))
    return slices, claims


def _rss() -> int:
    """Resident bytes of this process."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(len(ordered) * q) - 1)]


def _paged(objs: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """`objs` in pages of the planner's list size (`PAGE`), as its watches read a kind."""
    for at in range(0, len(objs), PAGE):
        yield objs[at : at + PAGE]


def _applied(
    inv: Inventory, slices: Iterable[list[dict[str, Any]]], claims: Iterable[list[dict[str, Any]]]
) -> tuple[float, float, float]:
    """Apply first listings, page by page, as the planner's watches do (`KubeSync`: one kind after another,
    each under `loading(keep=True)` and `Inventory.applying(until_synced=True)`, a page of claims at once,
    each page let go before the next is read; then the ledger marked synced): seconds for the device classes
    and slices, for the claims, and for counting and indexing them at sync."""
    started = time.perf_counter()
    with loading(keep=True), inv.applying(until_synced=True):
        for dc in fleet_device_classes():
            inv.upsert_device_class(dc)
    with loading(keep=True), inv.applying(until_synced=True):
        for page in slices:
            with inv.applying():
                for sl in page:
                    inv.upsert_slice(sl)
            del page
    listed = time.perf_counter()
    with loading(keep=True), inv.applying(until_synced=True):
        for page in claims:
            with inv.applying():
                inv.upsert_claims(page)
            del page
    claimed = time.perf_counter()
    with loading(keep=True):
        inv.synced = True
    return listed - started, claimed - listed, time.perf_counter() - claimed


def isolated(call: Callable[..., _T], *args: Any) -> _T:
    """`call(*args)` in a fresh process, as the planner runs: no heap of the benchmark's earlier parts."""
    with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(call, *args).result()


def build_and_events(nodes: int, seed: int, events: int = 300) -> dict[str, float]:
    """The ledger of `nodes` × 8 GPUs, half of it held: built from listings as the watches deliver them,
    then single slice and claim events applied to it; a full pass of the collector over it; its size."""
    rng = random.Random(seed)
    slices, claims = fleet(nodes, 0.5, rng)
    gc.collect()
    before = _rss()
    inv = Inventory()
    slices_s, claims_s, index_s = _applied(inv, _paged(slices), _paged(claims))
    grown = _rss() - before
    gc.unfreeze()  # what a full pass would walk, were the listings not frozen out of it
    started = time.perf_counter()
    gc.collect()
    full_gc = time.perf_counter() - started
    gc.freeze()  # as the planner does once every kind is listed
    claim_ms: list[float] = []
    for _ in range(events):
        claim = claims[rng.randrange(len(claims))]
        for apply in (inv.delete_claim, inv.upsert_claim):
            started = time.perf_counter()
            apply(claim)
            claim_ms.append((time.perf_counter() - started) * 1000)
    slice_ms: list[float] = []
    for _ in range(events):
        at = rng.randrange(len(slices))
        old = slices[at]
        spec = {
            **old["spec"],
            "pool": {**old["spec"]["pool"], "generation": old["spec"]["pool"]["generation"] + 1},
        }
        slices[at] = {**old, "spec": spec}  # the driver publishes its pool again
        started = time.perf_counter()
        inv.upsert_slice(slices[at])
        slice_ms.append((time.perf_counter() - started) * 1000)
    gc.unfreeze()
    return {
        "devices": float(len(inv.view.fleet.devices)),
        "claims": float(len(claims)),
        "slices_s": slices_s,
        "claims_s": claims_s,
        "index_s": index_s,
        "build_s": slices_s + claims_s + index_s,
        "rss_mib": grown / (1 << 20),
        "full_gc_s": full_gc,
        "claim_event_ms_p50": statistics.median(claim_ms),
        "claim_event_ms_p99": _pct(claim_ms, 0.99),
        "claim_event_ms_max": max(claim_ms),
        "slice_event_ms_p50": statistics.median(slice_ms),
        "slice_event_ms_p99": _pct(slice_ms, 0.99),
        "slice_event_ms_max": max(slice_ms),
    }


def _items(body: bytes) -> list[dict[str, Any]]:
    """The objects of one list answer, parsed from its bytes as the planner's watches parse them."""
    return cast(list[dict[str, Any]], json.loads(body)["items"])


def resident(nodes: int, seed: int) -> dict[str, float]:
    """The planner's resident memory over `nodes` × 8 half held, in MiB: at start (what it imports) and once
    its ledger is built from listings as its watches read them (JSON pages of `PAGE` parsed one at a time, the
    slices kept as parsed, each page of claims let go once applied); the pages' own bytes, made beforehand,
    are not counted. At start: this process, with the planner's package imported (the app, the watches,
    the solver) as the planner has it."""
    start = _rss()
    slices, claims = fleet(nodes, 0.5, random.Random(seed))
    pages = {
        kind: [json.dumps({"items": page}).encode() for page in _paged(objs)]
        for kind, objs in (("slices", slices), ("claims", claims))
    }
    kept = sum(len(page) for kind in pages.values() for page in kind)
    del slices, claims
    gc.collect()
    inv = Inventory()
    _applied(inv, map(_items, pages["slices"]), map(_items, pages["claims"]))
    gc.collect()
    return {"start_mib": start / (1 << 20), "built_mib": (_rss() - kept) / (1 << 20)}


def _deep_size(root: object) -> int:
    """Bytes of every object reachable from `root` through dicts, lists and tuples, each counted once."""
    seen: set[int] = set()
    stack = [root]
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj)
        if isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, list | tuple):
            stack.extend(obj)
    return total


def kept_slices(nodes: int, seed: int) -> dict[str, float]:
    """Bytes the listed slices weigh per device: as parsed from the JSON pages the watches read, and as the
    books keep them once their devices are read (what devices alike publish kept once: `DeviceReader`)."""
    slices, _ = fleet(nodes, 0.5, random.Random(seed))
    kept = [sl for page in _paged(slices) for sl in _items(json.dumps({"items": page}).encode())]
    devices = sum(len(sl["spec"]["devices"]) for sl in kept)
    parsed = _deep_size(kept)
    inv = Inventory()
    _applied(inv, [kept], [])
    return {"devices": float(devices), "parsed_b": parsed / devices, "kept_b": _deep_size(kept) / devices}


def waiting_orders(
    nodes: int, fill: float, counts: tuple[int, ...], seed: int
) -> dict[int, tuple[float, int, list[str]]]:
    """Seconds for the planner as shipped to answer `count` orders waiting together (one `plan_many`) on a
    fleet of `nodes` × 8 GPUs that far held; orders placed; the solver's outcomes. Each count on the same
    ledger: what one pass reserved is released before the next."""
    rng = random.Random(seed)
    slices, claims = fleet(nodes, fill, rng)
    inv = Inventory.from_objects(fleet_device_classes(), slices, claims)
    gc.collect()
    gc.freeze()
    outcomes: list[str] = []
    planner = Planner(inv, on_solver=outcomes.append)
    out: dict[int, tuple[float, int, list[str]]] = {}
    for count in counts:
        requests = [
            PlanRequest(
                order=OrderRef(namespace="wait", name=f"w{count}-{i}"),
                facts=sized_facts(rng.uniform(5, 120), rng),
            )
            for i in range(count)
        ]
        outcomes.clear()
        started = time.perf_counter()
        answers = planner.plan_many(requests)
        took = time.perf_counter() - started
        out[count] = (took, sum(a.placement is not None for a in answers), list(outcomes))
        for r in requests:
            planner.release(r.order.namespace, r.order.name)
    gc.unfreeze()
    return out


def _uvicorn(app: Any, port: int, tls: str, ready: Any) -> None:
    """Serve `app` on https://127.0.0.1:`port` as the chart serves the planner (the certificate and key of
    the directory `tls`); `ready` is set once it listens."""
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=port,
            log_level="warning",
            lifespan="off",
            ssl_certfile=str(Path(tls) / "tls.crt"),
            ssl_keyfile=str(Path(tls) / "tls.key"),
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    ready.set()
    thread.join()


def _serve(port: int, tls: str, ready: Any, nodes: int, seed: int, reviews: Any) -> None:
    """The planner's app over a half-held fleet, authentication on: a TokenReview stand-in that knows one
    token, behind the production cache (`CallerCheck`, 60 s)."""
    slices, claims = fleet(nodes, 0.5, random.Random(seed))
    inv = Inventory()
    _applied(inv, _paged(slices), _paged(claims))
    gc.collect()
    gc.freeze()

    def review(token: str) -> str | None:
        with reviews.get_lock():
            reviews.value += 1
        return CALLER if token == TOKEN else None

    _uvicorn(create_app(Planner(inv), caller=CallerCheck(review, [CALLER])), port, tls, ready)


def _serve_canned(port: int, tls: str, ready: Any, answer: bytes) -> None:
    """The transport with nothing behind it: an ASGI app that reads each request whole and answers
    `answer` (a plan answer the planner gave), under the same server as the planner's."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        more = True
        while more:
            more = (await receive()).get("more_body", False)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": answer})

    _uvicorn(app, port, tls, ready)


def _authority(tls: Path) -> Path:
    """A serving certificate for 127.0.0.1 (tls.crt, tls.key) from an authority made here; the authority's
    certificate (what the controller trusts)."""
    authority = trustme.CA()
    serving = authority.issue_cert("127.0.0.1")
    serving.private_key_pem.write_to_path(str(tls / "tls.key"))
    serving.cert_chain_pems[0].write_to_path(str(tls / "tls.crt"))
    authority.cert_pem.write_to_path(str(tls / "ca.crt"))
    return tls / "ca.crt"


@contextmanager
def _served(target: Callable[..., None], tls: Path, *args: Any) -> Iterator[str]:
    """`target(port, tls, ready, *args)` serving in a process of its own, as the planner runs; its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    process = context.Process(target=target, args=(port, str(tls), ready, *args), daemon=True)
    process.start()
    try:
        if not ready.wait(600):
            raise RuntimeError(f"{target.__name__} did not start")
        yield f"https://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.join(10)


def http_plan(nodes: int, rng: random.Random, samples: int = 1000) -> dict[str, float]:
    """`POST /v1/plan` as the controller calls it (`PlannerClient` over HTTPS, checking the planner's
    certificate against its authority, its token from a file) against the real app on loopback over
    `nodes` × 8 half held: p50/p99/max ms of 100 warm-up calls then `samples`; each plan is released after
    (not timed), so the ledger stays as it was. Beside each call, the same call to the transport alone (the
    same client and server answering a canned plan: the floor under the app) and a fixed loop."""
    with tempfile.TemporaryDirectory() as tmp:
        authority = _authority(Path(tmp))
        token = Path(tmp) / "token"
        token.write_text(TOKEN + "\n")
        reviews = multiprocessing.get_context("spawn").Value("i", 0)
        requests = [
            PlanRequest(
                order=OrderRef(namespace="bench", name=f"h{i}"), facts=sized_facts(rng.uniform(5, 120), rng)
            )
            for i in range(100 + samples)
        ]
        times: list[float] = []
        floor: list[float] = []
        yardstick: list[float] = []
        with (
            _served(_serve, Path(tmp), nodes, rng.randrange(10**6), reviews) as url,
            PlannerClient(url, token_file=token, ca_file=authority) as client,
        ):
            answer = client.plan(requests[0]).model_dump_json(by_alias=True, exclude_none=True).encode()
            client.release(requests[0].order)
            with (
                _served(_serve_canned, Path(tmp), answer) as canned_url,
                PlannerClient(canned_url, token_file=token, ca_file=authority) as canned,
            ):
                for request in requests:
                    started = time.perf_counter()
                    client.plan(request)
                    times.append((time.perf_counter() - started) * 1000)
                    client.release(request.order)
                    started = time.perf_counter()
                    canned.plan(request)
                    floor.append((time.perf_counter() - started) * 1000)
                    yardstick.append(_fixed_work())
        measured, bare, steady = times[100:], floor[100:], yardstick[100:]
        return {
            "p50_ms": statistics.median(measured),
            "p99_ms": _pct(measured, 0.99),
            "max_ms": max(measured),
            "token_reviews": float(reviews.value),
            "calls": float(len(times) * 2 + 2),  # plan and release each, and the first answer taken
            "floor_p50_ms": statistics.median(bare),
            "floor_p99_ms": _pct(bare, 0.99),
            "yardstick_p50_ms": statistics.median(steady),
            "yardstick_p99_ms": _pct(steady, 0.99),
        }


def _fixed_work() -> float:
    """Milliseconds a fixed piece of work took (the same loop each time): read beside each call, its tail
    is the machine's own (another tenant's bursts), which no code of ours moves."""
    started = time.perf_counter()
    total = 0
    for i in range(20_000):
        total += i
    return (time.perf_counter() - started) * 1000
