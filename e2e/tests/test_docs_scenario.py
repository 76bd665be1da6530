"""module/docs/SCENARIO.md and EXAMPLES.md run as written: each kubectl command, by the person who would run
it, against the test bed, with the output its comments show (issue 16).

Alice (the administrator) runs as the test bed's administrator; Bob (a user of the namespace `support`) runs
as the test bed's namespace user, bound there to the module's editor role and Kubernetes' own `edit` role,
as a namespace user is. YAML blocks become the files the following `kubectl apply -f` names. A command
with output in its comments is retried until that output shows (columns compared except AGE; `x...` is a
prefix), one without must exit 0, `-w` watches until the order is Ready. Commands that call the endpoint
from a pod inside the cluster (`curl`, `kubectl run`) need a real node and are left to its tests.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from isvc_testbed import bin_dir
from isvc_testbed.cluster import Cluster
from isvc_testbed.helpers import ignore_404, user_namespace, wait_for
from isvc_testbed.module import ROOT
from kubernetes import client as k8s

pytestmark = pytest.mark.e2e

SCENARIO = ROOT / "module" / "docs" / "SCENARIO.md"
EXAMPLES = ROOT / "module" / "docs" / "EXAMPLES.md"
# What the examples take as given: their namespaces, and the PriorityClass a class names ("it must exist").
EXAMPLE_NAMESPACES = ("support", "research", "search", "backend")
PLACEHOLDERS = {"<your Hugging Face token>": "hf_example"}
IN_CLUSTER = ("curl ", "kubectl run ")
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
_HEADING = re.compile(r"^## \d+\. (\w+)", re.M)
_CONDITION = re.compile(r"^(\w+)=\w+ \w+$")


def _steps(text: str) -> Iterator[tuple[str, str, str]]:
    """(person, language, body) of every fenced block, the person named by the step's heading."""
    headings = [(m.start(), m.group(1)) for m in _HEADING.finditer(text)]
    for fence in _FENCE.finditer(text):
        person = next((name for at, name in reversed(headings) if at < fence.start()), "")
        yield person, fence.group(1), fence.group(2)


def _commands(body: str) -> list[tuple[str, list[str]]]:
    """A bash block as (command, the output lines its comments show)."""
    out: list[tuple[str, list[str]]] = []
    pending = ""
    for line in body.splitlines():
        if pending:
            pending += "\n" + line
        elif line.startswith("# ") and out:
            out[-1][1].append(line[2:])
            continue
        elif line.strip():
            pending = line
        if pending and not pending.endswith("\\"):
            out.append((pending, []))
            pending = ""
    return out


def _columns(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def _shows(expected: list[str], actual: str) -> bool:
    """The output shows what the comment says: table rows by column (AGE aside), condition lines by type,
    other lines as they are."""
    lines = [line for line in actual.splitlines() if line.strip()]
    if expected[0].startswith("NAME"):
        header = _columns(expected[0])
        rows = [_columns(line) for line in lines]
        for row in expected[1:]:
            want = _columns(row)
            if not any(
                len(have) == len(want)
                and all(
                    h == "AGE" or (w.endswith("...") and v.startswith(w[:-3])) or w == v
                    for h, w, v in zip(header, want, have, strict=True)
                )
                for have in rows
            ):
                return False
        return True
    if all(_CONDITION.match(line) for line in expected):  # a status "at any moment": the conditions shown
        return [line.split("=")[0] for line in expected] == [line.split("=")[0] for line in lines]
    return all(line in lines for line in expected)


class Person:
    """Runs a step's commands as one identity, in a directory holding the step's YAML files."""

    def __init__(self, kubeconfig: Path, workdir: Path) -> None:
        self.env = {
            **os.environ,
            "KUBECONFIG": str(kubeconfig),
            "PATH": f"{bin_dir()}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        self.workdir = workdir

    def run(self, command: str) -> tuple[int, str]:
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            cwd=self.workdir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        return done.returncode, done.stdout + done.stderr

    def watch_until_ready(self, command: str, timeout: float) -> str:
        """A `-w` command, read until a row says Ready, then stopped."""
        proc = subprocess.Popen(
            ["bash", "-c", command],
            cwd=self.workdir,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        seen: list[str] = []
        stop = threading.Timer(timeout, proc.kill)  # the deadline: ends the read even when nothing is printed
        stop.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                seen.append(line)
                if len(_columns(line)) > 1 and _columns(line)[1] == "Ready":
                    return "".join(seen)
        finally:
            stop.cancel()
            proc.kill()
            proc.wait(5)
            if proc.stdout is not None:
                proc.stdout.close()
        _, said = self.run(command.replace(" -w", " -o 'jsonpath={.status.conditions}'"))
        raise AssertionError(f"{command!r} never showed Ready:\n{''.join(seen)}\nits conditions: {said}")


def _users_namespace(admin_api: k8s.ApiClient, name: str) -> None:
    """A namespace of the user: the module's editor role and Kubernetes' `edit` role for alice."""
    user_namespace(admin_api, name, user="alice", cluster_role="d8:user-authz:isvc:editor")
    user_namespace(admin_api, name, user="alice", cluster_role="edit")


def _clean(admin_api: k8s.ApiClient, namespaces: tuple[str, ...], classes: tuple[str, ...]) -> None:
    """Delete the orders and classes a document made, and wait until no LaunchPlan holds room for them."""
    custom = k8s.CustomObjectsApi(admin_api)

    def items(namespace: str, plural: str) -> list[Any]:
        listed = cast(
            dict[str, Any],
            custom.list_namespaced_custom_object("ai.deckhouse.io", "v1alpha1", namespace, plural),
        )
        return list(listed["items"])

    for namespace in namespaces:
        for item in items(namespace, "inferenceservices"):
            custom.delete_namespaced_custom_object(
                "ai.deckhouse.io", "v1alpha1", namespace, "inferenceservices", item["metadata"]["name"]
            )
    for name in classes:
        try:
            custom.delete_cluster_custom_object(
                "ai.deckhouse.io", "v1alpha1", "inferenceserviceclasses", name
            )
        except k8s.ApiException as exc:
            if exc.status != 404:
                raise
    wait_for(
        lambda: not any(items(ns, "launchplans") for ns in namespaces),
        120,
        what="the documents' LaunchPlans gone",
    )


@pytest.fixture
def support(module: Any, admin_api: k8s.ApiClient) -> Iterator[str]:
    """Namespace `support`, Bob's."""
    _users_namespace(admin_api, "support")
    yield "support"
    _clean(admin_api, ("support",), ("support-chat",))


@pytest.fixture
def example_namespaces(module: Any, admin_api: k8s.ApiClient) -> Iterator[tuple[str, ...]]:
    """The namespaces the examples name, and the PriorityClass `inference-high` research-h100 names."""
    for name in EXAMPLE_NAMESPACES:
        _users_namespace(admin_api, name)
    scheduling = k8s.SchedulingV1Api(admin_api)
    try:
        scheduling.create_priority_class(cast(Any, {"metadata": {"name": "inference-high"}, "value": 1000}))
    except k8s.ApiException as exc:
        if exc.status != 409:
            raise
    yield EXAMPLE_NAMESPACES
    _clean(admin_api, EXAMPLE_NAMESPACES, ("embeddings", "internal-chat", "research-h100"))
    scheduling.delete_priority_class("inference-high")
    ignore_404(lambda: k8s.CoreV1Api(admin_api).delete_namespaced_secret("hf-token", "support"))


def test_every_command_of_the_scenario_runs_as_written_by_the_person_it_names(
    cluster: Cluster, support: str, tmp_path: Path
) -> None:
    people = {
        "Alice": Person(cluster.admin_kubeconfig, tmp_path),
        "Bob": Person(cluster.alice_kubeconfig, tmp_path),
    }
    ran: list[str] = []
    replans: list[int] = []
    for person, language, body in _steps(SCENARIO.read_text(encoding="utf-8")):
        if language == "yaml":
            doc = yaml.safe_load(body)
            (tmp_path / f"{doc['metadata']['name']}.yaml").write_text(body)
            continue
        if language != "bash":
            continue
        who = people[person]
        for command, expected in _commands(body):
            if command.startswith(IN_CLUSTER) or "$URL" in command:
                continue
            if " -w" in command.split("#")[0]:
                who.watch_until_ready(command, 180)
            elif expected:
                _until_shown(who, person, command, expected)
            else:
                code, out = who.run(command)
                assert code == 0, f"{person}: {command!r} exited {code}: {out}"
            ran.append(command)
            if command.startswith("kubectl patch infsvc"):  # the scenario says it replans and comes back
                replans.append(_replans(who))
    assert len(ran) >= 12, ran  # every step's commands ran, not a parse that found none
    assert replans and replans[0] >= 1, replans


def test_every_example_is_accepted_as_written_and_its_commands_show_what_they_say(
    cluster: Cluster, example_namespaces: tuple[str, ...], tmp_path: Path
) -> None:
    """Manifests to copy: each whole manifest applied as is, by an administrator for a class and by the
    namespace user for an order; then the example's commands (placeholders filled in)."""
    admin, user = Person(cluster.admin_kubeconfig, tmp_path), Person(cluster.alice_kubeconfig, tmp_path)
    applied: list[str] = []
    ran: list[str] = []
    for _, language, body in _steps(EXAMPLES.read_text(encoding="utf-8")):
        if language == "yaml":
            doc = yaml.safe_load(body)
            if "apiVersion" not in doc:
                continue  # a fragment of the manifest above it
            name = doc["metadata"]["name"]
            (tmp_path / f"{name}.yaml").write_text(body)
            who = admin if doc["kind"] == "InferenceServiceClass" else user
            code, out = who.run(f"kubectl apply -f {name}.yaml")
            assert code == 0, f"{doc['kind']} {name} as written is refused: {out}"
            applied.append(name)
            continue
        if language != "bash":
            continue
        for command, expected in _commands(body):
            if command.startswith(IN_CLUSTER) or "$URL" in command or "$(" in command:
                continue
            for placeholder, value in PLACEHOLDERS.items():
                command = command.replace(placeholder, value)
            who = admin if "infsvcclass" in command else user
            if command.startswith("kubectl apply -f") and command.split()[-1][:-5] in applied:
                continue  # the manifest above, already applied by its author
            if " -w" in command:
                who.watch_until_ready(command, 180)
            elif expected:
                _until_shown(who, "", command, expected)
            else:
                code, out = who.run(command)
                assert code == 0, f"{command!r} exited {code}: {out}"
            ran.append(command)
    assert len(applied) >= 8 and len(ran) >= 3, (applied, ran)


def _until_shown(who: Person, person: str, command: str, expected: list[str]) -> None:
    last: list[str] = []

    def shown() -> bool:
        code, out = who.run(command)
        last[:] = [f"exit {code}", out]
        return code == 0 and _shows(expected, out)

    try:
        wait_for(shown, 180, interval=2, what=command)
    except TimeoutError as exc:
        raise AssertionError(f"{person}: {command!r} never showed {expected}; last: {last}") from exc


def _replans(bob: Person) -> int:
    """Wait until the edited order is Ready on its new plan; its replanCount."""

    def ready() -> int | None:
        code, out = bob.run("kubectl get infsvc support-llm -n support -o yaml")
        status = (yaml.safe_load(out) or {}).get("status") or {} if code == 0 else {}
        resolved = status.get("resolved") or {}
        if status.get("phase") == "Ready" and resolved.get("servedModel") == "Qwen/Qwen2.5-3B-Instruct":
            return int(resolved.get("replanCount", 0))
        return None

    return wait_for(ready, 180, interval=2, what="support-llm Ready on the smaller model")
