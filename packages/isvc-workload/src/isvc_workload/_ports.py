"""The ports of a compiled runtime, by the names the manifests agree on."""

from __future__ import annotations

from isvc_api import CompiledRuntime, Port

from isvc_workload._errors import PlanNotExpressible

__all__ = [
    "DEFAULT_HTTP_PORT",
    "SERVICE_PORT",
    "api_key_env",
    "container_ports",
    "named_port",
    "runtime_ports",
]

SERVICE_PORT = 8000  # the Service's http port, whatever the runtime listens on
DEFAULT_HTTP_PORT = 8000  # the runtime's http port when its recipe declares no port at all


def runtime_ports(runtime: CompiledRuntime) -> list[Port]:
    """The runtime's ports; one is named `http` (the API), added at 8000 when the recipe declares none."""
    if not runtime.ports:
        return [Port(name="http", container_port=DEFAULT_HTTP_PORT)]
    if not any(p.name == "http" for p in runtime.ports):
        raise PlanNotExpressible(
            "runtime.ports", [p.name for p in runtime.ports], "the runtime's API port is named http"
        )
    return list(runtime.ports)


def container_ports(runtime: CompiledRuntime) -> list[Port]:
    """The ports a container lists: one entry per number (the list is keyed by number), http first."""
    ports = sorted(runtime_ports(runtime), key=lambda p: p.name != "http")
    seen: set[int] = set()
    unique = []
    for port in ports:
        if port.container_port not in seen:
            seen.add(port.container_port)
            unique.append(port)
    return unique


def named_port(runtime: CompiledRuntime, name: str) -> int | None:
    """The container port named `name`, or None."""
    return next((p.container_port for p in runtime_ports(runtime) if p.name == name), None)


def api_key_env(runtime: CompiledRuntime) -> str | None:
    """The environment variable the runtime reads its API key from, when its recipe names one."""
    extra = runtime.model_extra or {}
    value = extra.get("api_key_env", extra.get("apiKeyEnv"))
    return str(value) if value else None
