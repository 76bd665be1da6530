"""Fixtures for e2e tests: one real control plane per session, the default fleet, the stand-in server.

Set ISVC_TESTBED_STATE=<dir> to run against a cluster started by `python -m isvc_testbed up --state-dir <dir>`
(`nox -s up`) instead of starting one per session.

`--kubeconfig PATH` (an administrator's kubeconfig) runs the suite against a cluster you bring: the test bed
starts no control plane, makes alice there through the certificates API, runs KWOK for the fake nodes
(`--no-kwok` when the cluster already runs a KWOK for nodes annotated `kwok.x-k8s.io/node: fake`), and the
fixtures install the fleet, its DeviceClasses and ResourceSlices, the CRDs and the chart there.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from isvc_testbed import BinariesMissing
from isvc_testbed.cluster import Cluster, install_crds
from isvc_testbed.fleet import Fleet
from isvc_testbed.helpers import namespace, user_namespace, wait_for, wait_granted
from isvc_testbed.module import ModuleProcesses, install_chart
from isvc_testbed.standin import StandIn
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

E2E = Path(__file__).resolve().parents[1]
DEFAULT_FLEET = E2E / "fleets" / "default.yaml"
CATALOG_CRDS = sorted((E2E / "crds").glob("*.yaml"))


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("isvc-testbed")
    group.addoption(
        "--kubeconfig",
        metavar="PATH",
        type=Path,
        help="run against the cluster this administrator's kubeconfig names (bring your own)",
    )
    group.addoption(
        "--no-kwok",
        dest="kwok",
        action="store_false",
        help="with --kubeconfig: the cluster already runs KWOK for the fake nodes; start none",
    )
    group.addoption(
        "--real-node",
        action="store_true",
        help="collect e2e/tests/realnode (a real kubelet + containerd node, root): `nox -s realnode`",
    )


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """e2e/tests/realnode runs only with --real-node (`nox -s realnode`, in `nox`), not in `nox -s e2e`."""
    if collection_path.name == "realnode" and not config.getoption("real_node"):
        return True
    return None


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    """The session's control plane (fails, never skips, when the binaries are missing)."""
    state_dir = os.environ.get("ISVC_TESTBED_STATE")
    if state_dir:
        yield Cluster.attach(Path(state_dir) / "state.json")
        return
    existing: Path | None = request.config.getoption("kubeconfig")
    try:
        c = Cluster(
            existing=existing.resolve() if existing else None, kwok=request.config.getoption("kwok")
        ).start()
    except BinariesMissing as e:
        pytest.fail(str(e), pytrace=False)
    try:
        yield c
        c.check()  # a component that died during the session fails the teardown, naming it
    finally:
        c.stop()


@pytest.fixture(scope="session")
def admin_api(cluster: Cluster) -> Iterator[k8s.ApiClient]:
    """ApiClient of the cluster administrator (system:masters)."""
    with cluster.api_client("admin") as api:
        yield api


@pytest.fixture(scope="session")
def alice_api(cluster: Cluster) -> Iterator[k8s.ApiClient]:
    """ApiClient of alice (group team-a), a namespace user with no rights until bound."""
    with cluster.api_client("alice") as api:
        yield api


@pytest.fixture(scope="session")
def fleet(admin_api: k8s.ApiClient) -> Fleet:
    """The default fleet, published, with every node Ready (KWOK initialized it)."""
    f = Fleet.load(DEFAULT_FLEET)
    f.publish(admin_api)
    core = k8s.CoreV1Api(admin_api)

    def all_ready() -> bool:
        for spec in f.nodes:
            node = core.read_node(spec.name)
            conds = (node.status.conditions if node.status else None) or []
            if not any(c.type == "Ready" and c.status == "True" for c in conds):
                return False
        return True

    wait_for(all_ready, 60, what="fleet nodes Ready")
    return f


@pytest.fixture(scope="session")
def catalog_crds(admin_api: k8s.ApiClient) -> list[str]:
    """The ai-models catalog test CRDs (Model, ClusterModel), Established."""
    return install_crds(admin_api, CATALOG_CRDS)


@pytest.fixture(scope="session")
def standin(cluster: Cluster) -> Iterator[StandIn]:
    """The stand-in inference server, reading auth Secrets as admin."""
    s = StandIn.from_kubeconfig(cluster.admin_kubeconfig)
    s.start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="session")
def team_a(admin_api: k8s.ApiClient) -> str:
    """Namespace team-a with alice bound to ClusterRole d8:user-authz:isvc:editor (the module ships it)."""
    return user_namespace(admin_api, "team-a", user="alice", cluster_role="d8:user-authz:isvc:editor")


@pytest.fixture(scope="session")
def module(cluster: Cluster, fleet: Fleet, standin: StandIn, team_a: str) -> Iterator[ModuleProcesses]:
    """The module chart installed, and its controller and planner running as the chart's ServiceAccounts."""
    install_chart(cluster)
    processes = ModuleProcesses(cluster, standin.url_template)
    try:
        yield processes.start()
    finally:
        processes.stop()
        if os.environ.get("ISVC_E2E_LOGS"):
            for name in ("controller", "planner", "hub"):
                print(f"----- {name} -----\n{processes.log(name)[-5000:]}")


# ---- the tenants of the tenant-boundary suites (issues 29 and 44)

TENANT, OTHER_TENANT = "tb-alice", "tb-bob"
EDITOR = "d8:user-authz:isvc:editor"


def _bind(api: k8s.ApiClient, ns: str, subject: dict[str, str], role: str) -> None:
    binding = {
        "metadata": {"name": f"{subject['name']}-{role.replace(':', '-')}", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [subject],
    }
    try:
        k8s.RbacAuthorizationV1Api(api).create_namespaced_role_binding(ns, binding)
    except ApiException as e:
        if e.status != 409:
            raise
    user = subject["name"]
    if subject["kind"] == "ServiceAccount":
        user = f"system:serviceaccount:{subject['namespace']}:{user}"
    wait_granted(api, ns, user, role)


@pytest.fixture(scope="module")
def tenants(module: ModuleProcesses, cluster: Cluster, admin_api: k8s.ApiClient) -> dict[str, Path]:
    """alice with `edit` and the module's editor role in tb-alice, as real clusters give namespace owners; a
    pod's ServiceAccount in tb-bob with the same; and one in tb-alice with the module's editor role only."""
    user_namespace(admin_api, TENANT, user="alice", cluster_role=EDITOR)
    _bind(
        admin_api, TENANT, {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}, "edit"
    )
    namespace(admin_api, OTHER_TENANT)
    core = k8s.CoreV1Api(admin_api)
    for ns, name in ((OTHER_TENANT, "bob"), (TENANT, "estimator")):
        try:
            core.create_namespaced_service_account(ns, {"metadata": {"name": name}})
        except ApiException as e:
            if e.status != 409:
                raise
    bob = {"kind": "ServiceAccount", "name": "bob", "namespace": OTHER_TENANT}
    for role in (EDITOR, "edit"):
        _bind(admin_api, OTHER_TENANT, bob, role)
    _bind(admin_api, TENANT, {"kind": "ServiceAccount", "name": "estimator", "namespace": TENANT}, EDITOR)
    return {
        "alice": cluster.alice_kubeconfig,
        "bob": cluster.service_account_kubeconfig(OTHER_TENANT, "bob"),
        "estimator": cluster.service_account_kubeconfig(TENANT, "estimator"),
    }
