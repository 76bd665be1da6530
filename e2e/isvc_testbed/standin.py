"""A stand-in OpenAI-compatible inference server serving many orders on one 127.0.0.1 port.

Order `namespace/name` lives under the path prefix `/{namespace}/{name}`: `/v1/models`,
`/v1/chat/completions`, `/v1/completions`, `/v1/embeddings`, `/v1/rerank` and `/health`. The bearer
token an order accepts is the `token` key of its Secret `{name}-auth`; without that Secret no token is
accepted, unless the order was switched to authentication None.
`/v1/models` lists exactly the name the order's compiled runtime serves: the value of
`--served-model-name` (vLLM, TEI) or `--alias` (llama.cpp) in the arguments of its StatefulSet's server
container (what its pods run); with no StatefulSet it lists nothing, as no server would run. Both are kept by
a list and a watch each (the module's labelled Secrets and StatefulSets), not read per request: the bed's
API server load at rest is the product's own (issue 26: 2,809 of 3,040 reads a minute at rest came from
reading them on every probe). Tests steer orders through control calls: `fail`/`heal` (503 or normal answers),
`set_auth_none`, `set_model` (list another name, as a misconfigured runtime would); the same over HTTP
under `/_control/`.

Simulated pod and Service IPs have nothing behind them: the controller reaches this server only through its
endpoint-resolution seam, with the URL template `http://127.0.0.1:{port}/{namespace}/{name}`.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import hmac
import json
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from isvc_api import LABEL_ORDER
from isvc_workload import CONTAINER_NAME
from kubernetes import client as k8s
from kubernetes import watch as k8s_watch

from isvc_testbed._kube import api_client

__all__ = [
    "OrderState",
    "SecretTokens",
    "ServedNameSource",
    "StandIn",
    "TokenSource",
    "WorkloadNames",
    "main",
    "served_name",
]

TokenSource = Callable[[str, str], str | None]
"""(namespace, order name) -> the token the order accepts, or None when it has no auth Secret."""
ServedNameSource = Callable[[str, str], str | None]
"""(namespace, order name) -> the model name its compiled runtime serves, or None without one."""

# The flags the shipped recipes pass the served name with (packages/isvc-runtime-recipes/.../recipes/):
# vllm-*.yaml and tei-*.yaml `--served-model-name {servedName}`, llamacpp-*.yaml `--alias {servedName}`.
_STREAMED = object()  # a handler that answered itself (server-sent events)
SERVED_NAME_FLAGS = ("--served-model-name", "--alias")


def served_name(args: Sequence[str]) -> str | None:
    """The name a runtime started with these arguments serves, or None when none of the flags is there."""
    for flag in SERVED_NAME_FLAGS:
        if flag in args:
            i = list(args).index(flag)
            return args[i + 1] if i + 1 < len(args) else None
    return None


@dataclass
class OrderState:
    """What a test has told the stand-in about one order, and how often it was called."""

    failing: bool = False
    auth_none: bool = False
    model: str | None = None
    requests: int = 0
    slots: int | None = None  # chats served at once (set_queue); None: no limit, no wait
    seconds: float = 0.0  # how long one chat holds its slot
    busy: int = 0
    waiting: int = 0
    meter: tuple[str, int, int] | None = None  # the request meter's counts /v1/models carries (set_meter)


class _Watched:
    """An answer per order kept by a list and a watch of one kind, in a thread; read from memory only."""

    def __init__(self, list_call: Callable[..., Any], *args: Any, label_selector: str | None = None) -> None:
        self._call = (list_call, args, label_selector)
        self._values: dict[tuple[str, str], str | None] = {}
        self._lock = threading.Lock()
        self._listed = threading.Event()
        self._stop = threading.Event()
        threading.Thread(target=self._run, name=f"standin-watch-{list_call.__name__}", daemon=True).start()

    def __call__(self, namespace: str, name: str) -> str | None:
        self._listed.wait(10)
        with self._lock:
            return self._values.get((namespace, name))

    def stop(self) -> None:
        """End the watch at its next event or timeout."""
        self._stop.set()

    def _key(self, obj: dict[str, Any]) -> tuple[str, str] | None:
        raise NotImplementedError

    def _value(self, obj: dict[str, Any]) -> str | None:
        raise NotImplementedError

    def _run(self) -> None:
        call, args, selector = self._call
        extra = {"label_selector": selector} if selector else {}
        while not self._stop.is_set():
            try:
                listing = call(*args, _preload_content=False, **extra)
                body = json.loads(listing.data)
                values = {
                    k: self._value(o) for o in body.get("items") or [] if (k := self._key(o)) is not None
                }
                with self._lock:
                    self._values = values
                self._listed.set()
                stream = k8s_watch.Watch().stream(
                    call,
                    *args,
                    resource_version=body["metadata"]["resourceVersion"],
                    timeout_seconds=240,
                    **extra,
                )
                for event in stream:
                    if self._stop.is_set():
                        return
                    obj = event["object"]
                    if not isinstance(obj, dict):
                        obj = k8s.ApiClient().sanitize_for_serialization(obj)
                    key = self._key(obj)
                    if event["type"] == "ERROR":
                        break
                    if key is None:
                        continue
                    with self._lock:
                        if event["type"] == "DELETED":
                            self._values.pop(key, None)
                        else:
                            self._values[key] = self._value(obj)
            except Exception:  # the API server restarted, the kind is not served yet: list again
                self._stop.wait(1.0)


class SecretTokens(_Watched):
    """`{name}-auth`.data.token of the module's Secrets (labelled with their order), kept by a watch."""

    def __init__(self, api: k8s.ApiClient) -> None:
        super().__init__(k8s.CoreV1Api(api).list_secret_for_all_namespaces, label_selector=LABEL_ORDER)

    def _key(self, obj: dict[str, Any]) -> tuple[str, str] | None:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name") or "")
        return (meta.get("namespace") or "", name[: -len("-auth")]) if name.endswith("-auth") else None

    def _value(self, obj: dict[str, Any]) -> str | None:
        raw = (obj.get("data") or {}).get("token")
        return base64.b64decode(raw).decode() if raw else None


class WorkloadNames(_Watched):
    """The served name from the module's StatefulSets (the server container's arguments), kept by a watch:
    what the pods that run serve, as a replanned order's pods roll. A plan the cluster refused to roll out (a
    settled volume too small) leaves the set, and so the name, as they were."""

    def __init__(self, api: k8s.ApiClient) -> None:
        super().__init__(k8s.AppsV1Api(api).list_stateful_set_for_all_namespaces, label_selector=LABEL_ORDER)

    def _key(self, obj: dict[str, Any]) -> tuple[str, str] | None:
        meta = obj.get("metadata") or {}
        return (meta.get("namespace") or "", str(meta.get("name") or ""))

    def _value(self, obj: dict[str, Any]) -> str | None:
        containers = (
            (((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers")
        ) or []
        server = next((c for c in containers if c.get("name") == CONTAINER_NAME), None)
        if server is None:
            return None
        return served_name([str(a) for a in [*(server.get("command") or []), *(server.get("args") or [])]])


def _vector(text: str, dim: int = 8) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [round((b - 128) / 128, 4) for b in digest[:dim]]


class StandIn:
    """The stand-in server. `start()` returns the base URL; `stop()` closes the port."""

    def __init__(
        self,
        token_source: TokenSource,
        served_names: ServedNameSource,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        if host != "127.0.0.1":
            raise ValueError("the stand-in listens on 127.0.0.1 only")
        self._tokens = token_source
        self._served = served_names
        self._host, self._port = host, port
        self._orders: dict[tuple[str, str], OrderState] = {}
        self._slots: dict[tuple[str, str], threading.BoundedSemaphore] = {}
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str | Path, port: int = 0) -> StandIn:
        """A stand-in that watches auth Secrets and StatefulSets with the given (admin) kubeconfig."""
        api = api_client(kubeconfig)
        return cls(SecretTokens(api), WorkloadNames(api), port=port)

    # ---- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> str:
        """Listen on 127.0.0.1 and serve in a background thread; return the base URL."""
        handler = type("Handler", (_Handler,), {"standin": self})
        self._server = ThreadingHTTPServer((self._host, self._port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="isvc-standin", daemon=True
        )
        self._thread.start()
        return self.base_url

    def stop(self) -> None:
        """Stop serving, the watches, and release the port."""
        for source in (self._tokens, self._served):
            if isinstance(source, _Watched):
                source.stop()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> StandIn:
        self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The port actually bound."""
        assert self._server is not None, "not started"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """e.g. http://127.0.0.1:40123"""
        return f"http://127.0.0.1:{self.port}"

    @property
    def url_template(self) -> str:
        """What the controller's endpoint-resolution seam needs: `{namespace}` and `{name}` placeholders."""
        return self.base_url + "/{namespace}/{name}"

    def url_for(self, namespace: str, name: str) -> str:
        """The base URL of one order (append /v1/models and so on)."""
        return f"{self.base_url}/{namespace}/{name}"

    # ---- control --------------------------------------------------------------------------------------

    def order(self, namespace: str, name: str) -> OrderState:
        """The (live) state of one order, created on first use."""
        with self._lock:
            return self._orders.setdefault((namespace, name), OrderState())

    def fail(self, namespace: str, name: str) -> None:
        """Make the order's API answer 503 to everything."""
        self.order(namespace, name).failing = True

    def heal(self, namespace: str, name: str) -> None:
        """Make the order's API answer normally again."""
        self.order(namespace, name).failing = False

    def set_auth_none(self, namespace: str, name: str, none: bool = True) -> None:
        """Accept requests without a token (an order whose class says authentication None)."""
        self.order(namespace, name).auth_none = none

    def set_model(self, namespace: str, name: str, model: str | None) -> None:
        """The model id /v1/models reports instead of the served name (None: the served name again)."""
        self.order(namespace, name).model = model

    def set_meter(self, namespace: str, name: str, pod: str, answered: int, errors: int) -> None:
        """Answer /v1/models with the request meter's header (X-Isvc-Meter: pod, answers, 5xx), as a replica
        behind the meter does (issue 42); the counts are a test's to move."""
        self.order(namespace, name).meter = (pod, answered, errors)

    def set_queue(self, namespace: str, name: str, slots: int, seconds: float) -> None:
        """Serve the order's chats `slots` at a time, each holding its slot `seconds`; the others wait, and
        `/metrics` says how many, in llama.cpp's words (requests_processing, requests_deferred)."""
        state = self.order(namespace, name)
        with self._lock:
            state.slots, state.seconds = slots, seconds
            self._slots[(namespace, name)] = threading.BoundedSemaphore(slots)

    def _held(self, namespace: str, name: str) -> contextlib.AbstractContextManager[None]:
        """A slot of the order's batch for one chat (waiting for one counts as deferred)."""
        state = self.order(namespace, name)
        semaphore = self._slots.get((namespace, name))

        @contextlib.contextmanager
        def slot() -> Iterator[None]:
            if semaphore is None:
                yield
                return
            with self._lock:
                state.waiting += 1
            semaphore.acquire()
            with self._lock:
                state.waiting -= 1
                state.busy += 1
            try:
                time.sleep(state.seconds)
                yield
            finally:
                with self._lock:
                    state.busy -= 1
                semaphore.release()

        return slot()

    def metrics(self, namespace: str, name: str) -> str:
        """The order's load in the Prometheus text format, named as llama.cpp's server names it."""
        state = self.order(namespace, name)
        lines = []
        for gauge, value in (("requests_processing", state.busy), ("requests_deferred", state.waiting)):
            lines += [f"# TYPE llamacpp:{gauge} gauge", f"llamacpp:{gauge} {value}"]
        return "\n".join(lines) + "\n"

    def served(self, namespace: str, name: str) -> str | None:
        """The model id /v1/models reports for the order now, None when it lists none."""
        override = self.order(namespace, name).model
        return override if override is not None else self._served(namespace, name)

    def requests(self, namespace: str, name: str) -> int:
        """How many API calls reached the order (health checks included)."""
        return self.order(namespace, name).requests

    def reset(self) -> None:
        """Forget every order's state."""
        with self._lock:
            self._orders.clear()
            self._slots.clear()

    def authorized(self, namespace: str, name: str, header: str | None) -> bool:
        """Whether an Authorization header value opens the order."""
        if self.order(namespace, name).auth_none:
            return True
        expected = self._tokens(namespace, name)
        if not expected or not header or not header.startswith("Bearer "):
            return False
        return hmac.compare_digest(header[len("Bearer ") :].strip().encode(), expected.encode())


def _service_host(host: str | None) -> list[str]:
    """[namespace, name] when a request was sent to an order's Service name, `{name}.{namespace}.svc[:port]`.

    A controller in a pod dials http://{service}.{namespace}.svc:8000/v1/models (its Service is named after
    the order); the test bed maps that name to a relay into this stand-in, which then answers as
    /{namespace}/{name}/v1/models.
    """
    labels = (host or "").rsplit(":", 1)[0].split(".")
    if len(labels) >= 3 and labels[2] == "svc":
        return [labels[1], labels[0]]
    return []


class _Handler(BaseHTTPRequestHandler):
    standin: StandIn
    protocol_version = "HTTP/1.1"
    server_version = "isvc-standin/0.1"
    # Headers and body leave in two writes; without TCP_NODELAY the body waits for the client's delayed ACK
    # (≈ 40 ms on Linux). Inference servers set it: CPython's asyncio does on every TCP transport
    # (Lib/asyncio/selector_events.py, `_set_nodelay`), so uvicorn and vLLM on it do.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _send(self, status: int, body: Any = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if status == HTTPStatus.UNAUTHORIZED:
            self.send_header("WWW-Authenticate", "Bearer")
        order = getattr(self, "_order", None)
        meter = self.standin.order(*order).meter if order and self.path.endswith("/v1/models") else None
        if meter is not None:
            self.send_header("X-Isvc-Meter", " ".join(str(v) for v in meter))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send(status, {"error": {"message": message, "type": HTTPStatus(status).phrase, "code": status}})

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        return json.loads(raw) if raw else {}

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        try:
            self._route(method)
        except json.JSONDecodeError:
            self._error(HTTPStatus.BAD_REQUEST, "request body is not JSON")

    def _route(self, method: str) -> None:
        parts = self.path.split("?", 1)[0].strip("/").split("/")
        if parts[0] == "_control":
            self._control(method, parts[1:])
            return
        parts = _service_host(self.headers.get("Host")) + parts
        if len(parts) < 3:
            self._error(HTTPStatus.NOT_FOUND, "paths look like /{namespace}/{name}/v1/...")
            return
        namespace, name, rest = parts[0], parts[1], "/".join(parts[2:])
        self._order = (namespace, name)
        st = self.standin
        state = st.order(namespace, name)
        state.requests += 1
        if state.failing:
            self._error(HTTPStatus.SERVICE_UNAVAILABLE, "the inference server is not available")
            return
        if rest == "health" and method == "GET":
            self._send(HTTPStatus.OK)
            return
        if not st.authorized(namespace, name, self.headers.get("Authorization")):
            self._error(HTTPStatus.UNAUTHORIZED, "invalid or missing bearer token")
            return
        if rest == "metrics" and method == "GET":  # behind the token, as llama-server's /metrics is
            data = st.metrics(namespace, name).encode()
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        model = st.served(namespace, name)
        handlers: dict[tuple[str, str], Callable[[str | None], Any]] = {
            ("GET", "v1/models"): lambda m: {
                "object": "list",
                "data": []
                if m is None
                else [{"id": m, "object": "model", "created": 0, "owned_by": "isvc-standin"}],
            },
            ("POST", "v1/chat/completions"): self._chat,
            ("POST", "v1/completions"): self._completion,
            ("POST", "v1/embeddings"): self._embeddings,
            ("POST", "v1/rerank"): self._rerank,
        }
        handler = handlers.get((method, rest))
        if handler is None:
            self._error(HTTPStatus.NOT_FOUND, f"no route {method} /{rest}")
            return
        answer = handler(model)
        if answer is not _STREAMED:
            self._send(HTTPStatus.OK, answer)

    def _stream(self, model: str | None, reply: str) -> None:
        """The reply as server-sent events, one word a chunk, as OpenAI-compatible servers stream."""
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        created = int(time.time())
        words = reply.split(" ")
        for i, word in enumerate(words):
            delta: dict[str, str] = {"content": word if i == 0 else f" {word}"}
            if i == 0:
                delta["role"] = "assistant"
            chunk = {
                "id": "chatcmpl-standin",
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
            }
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        done = {
            "id": "chatcmpl-standin",
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        }
        self.wfile.write(f"data: {json.dumps(done)}\n\ndata: [DONE]\n\n".encode())
        self.close_connection = True

    def _chat(self, model: str | None) -> Any:
        namespace, name = self._order
        with self.standin._held(namespace, name):
            return self._answer(model)

    def _answer(self, model: str | None) -> Any:
        body = self._body()
        messages = body.get("messages") or []
        last = str(messages[-1].get("content", "")) if messages else ""
        if body.get("stream"):
            self._stream(model, f"echo: {last}")
            return _STREAMED
        return {
            "id": "chatcmpl-standin",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": f"echo: {last}"},
                }
            ],
            "usage": {
                "prompt_tokens": len(last.split()),
                "completion_tokens": 1 + len(last.split()),
                "total_tokens": 1 + 2 * len(last.split()),
            },
        }

    def _completion(self, model: str | None) -> Any:
        """OpenAI's text completion (`/v1/completions`, which vLLM and llama.cpp's server also answer)."""
        prompt = self._body().get("prompt", "")
        prompts = [str(p) for p in prompt] if isinstance(prompt, list) else [str(prompt)]
        words = sum(len(p.split()) for p in prompts)
        return {
            "id": "cmpl-standin",
            "object": "text_completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {"index": i, "text": f"echo: {p}", "logprobs": None, "finish_reason": "stop"}
                for i, p in enumerate(prompts)
            ],
            "usage": {"prompt_tokens": words, "completion_tokens": words + 1, "total_tokens": 2 * words + 1},
        }

    def _embeddings(self, model: str | None) -> Any:
        inputs = self._body().get("input", "")
        items = inputs if isinstance(inputs, list) else [inputs]
        return {
            "object": "list",
            "model": model,
            "data": [
                {"object": "embedding", "index": i, "embedding": _vector(str(t))} for i, t in enumerate(items)
            ],
            "usage": {"prompt_tokens": len(items), "total_tokens": len(items)},
        }

    def _rerank(self, model: str | None) -> Any:
        body = self._body()
        query = str(body.get("query", ""))
        docs = [str(d) for d in body.get("documents") or []]
        qwords = set(query.lower().split())
        scores = [len(qwords & set(d.lower().split())) / (1 + len(qwords)) for d in docs]
        order = sorted(range(len(docs)), key=lambda i: -scores[i])
        return {
            "id": "rerank-standin",
            "model": model,
            "results": [
                {"index": i, "relevance_score": scores[i], "document": {"text": docs[i]}} for i in order
            ],
        }

    def _control(self, method: str, parts: list[str]) -> None:
        st = self.standin
        if parts == ["reset"] and method == "POST":
            st.reset()
            self._send(HTTPStatus.OK, {})
            return
        if len(parts) != 2:
            self._error(HTTPStatus.NOT_FOUND, "control paths look like /_control/{namespace}/{name}")
            return
        state = st.order(parts[0], parts[1])
        if method == "POST":
            body = self._body()
            if "failing" in body:
                state.failing = bool(body["failing"])
            if "authNone" in body:
                state.auth_none = bool(body["authNone"])
            if "model" in body:
                state.model = body["model"]
        self._send(HTTPStatus.OK, {**asdict(state), "authNone": state.auth_none})


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: serve until interrupted; prints the URL template on stdout."""
    p = argparse.ArgumentParser(prog="python -m isvc_testbed.standin", description=__doc__.splitlines()[0])
    p.add_argument("--kubeconfig", required=True, help="admin kubeconfig, used to read {name}-auth Secrets")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0 picks a free one)")
    args = p.parse_args(argv)
    standin = StandIn.from_kubeconfig(args.kubeconfig, port=args.port)
    standin.start()
    print(standin.url_template, flush=True)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    standin.stop()
    print("stand-in stopped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
