"""The one entry point: `nox -l` lists the sessions; `nox` runs the whole test suite."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import nox

ROOT = Path(__file__).parent
PACKAGES = [
    "isvc-api",
    "isvc-catalog",
    "isvc-planner-client",
    "isvc-planner",
    "isvc-runtime-recipes",
    "isvc-workload",
    "isvc-health",
    "isvc-operator",
    "isvc-testing",
]
# What each package needs from its siblings, installed from the tree (pip cannot see them on an index).
LOCAL_DEPS = {
    "isvc-api": [],
    "isvc-catalog": ["isvc-api", "isvc-planner-client", "isvc-planner", "isvc-testing"],
    "isvc-planner-client": ["isvc-api"],
    "isvc-planner": ["isvc-api", "isvc-planner-client", "isvc-catalog", "isvc-testing"],
    "isvc-runtime-recipes": ["isvc-api"],
    "isvc-workload": ["isvc-api"],
    "isvc-health": ["isvc-api"],
    "isvc-operator": [p for p in PACKAGES if p != "isvc-operator"],  # the planner and test support: tests
    "isvc-testing": ["isvc-api", "isvc-catalog", "isvc-planner-client", "isvc-planner"],
}
PYTHON = "3.11"
STATE = ROOT / ".nox" / "cluster"

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.sessions = ["lint", "tests", "chart", "e2e"]
nox.options.reuse_existing_virtualenvs = True


def _install(session: nox.Session, *packages: str, extras: str = "test") -> None:
    deps: list[str] = []
    for package in packages:
        for dep in LOCAL_DEPS[package]:
            if dep not in deps:
                deps.append(dep)
    args = [f"-e{ROOT / 'packages' / d}" for d in deps if d not in packages]
    args += [f"-e{ROOT / 'packages' / p}[{extras}]" for p in packages]
    session.install(*args)


@nox.session(python=PYTHON)
@nox.parametrize("package", PACKAGES, ids=PACKAGES)
def tests(session: nox.Session, package: str) -> None:
    """Unit tests of one package in its own environment (no cluster); `-- -k expr` passes to pytest."""
    _install(session, package)
    session.chdir(ROOT)
    session.run("pytest", f"packages/{package}/tests", "-q", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff, mypy --strict per package, import-linter layering, and generated files without drift."""
    _install(session, *PACKAGES)
    session.install("ruff>=0.6", "mypy>=1.11", "import-linter>=2.1", "types-PyYAML", "types-cachetools",
                    "pytest>=8")
    session.chdir(ROOT)
    session.run("ruff", "check", "packages", "e2e", "noxfile.py", "docs")
    session.install(f"-e{ROOT / 'e2e'}")
    for package in PACKAGES:
        session.run("mypy", "--strict", f"packages/{package}/src")
    session.run("mypy", "--strict", "e2e/isvc_testbed")
    session.run("lint-imports")
    session.run("isvc-crdgen", "crds", "--check")
    session.run("python", "docs/tools/crd_reference.py", "--check")
    session.run("pytest", "docs", "-q")


@nox.session(python=PYTHON)
def chart(session: nox.Session) -> None:
    """helm lint, helm-unittest suites and the settings schema cases of the module chart."""
    session.install("pytest>=8", "pyyaml>=6", "jsonschema>=4")
    binaries = _binaries(session)
    session.chdir(ROOT)
    session.run(str(binaries / "helm"), "lint", "module", external=True)
    session.run(str(binaries / "untt"), "-f", "tests/*_test.yaml", "module", external=True)
    session.run("pytest", "module/tests", "-q")


def _binaries(session: nox.Session) -> Path:
    """Build (or reuse from the cache) the pinned control-plane, helm and helm-unittest binaries."""
    session.run("bash", str(ROOT / "e2e" / "tools" / "build-bins.sh"), external=True)
    cache = Path(os.environ.get("ISVC_CACHE_DIR", Path.home() / ".cache" / "isvc-testbed"))
    return Path(os.environ.get("ISVC_BIN_DIR", cache / "bin"))


def _e2e_env(session: nox.Session) -> None:
    _install(session, *PACKAGES)
    session.install(f"-e{ROOT / 'e2e'}")
    _binaries(session)


@nox.session(python=PYTHON)
def e2e(session: nox.Session) -> None:
    """End-to-end tests against a real local control plane (etcd, apiserver, kcm, scheduler, KWOK)."""
    _e2e_env(session)
    session.chdir(ROOT)
    if "--kind" in session.posargs:
        session.error("--kind is not supported yet: the scenarios run on the local control plane only")
    session.run("pytest", "e2e/tests", "-q", "-p", "no:cacheprovider", *session.posargs)


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks: planner latency, throughput and packing quality; figures to .bench/planner.json."""
    _install(session, "isvc-testing")
    session.chdir(ROOT)
    session.run("python", "-m", "isvc_testing.bench", *session.posargs)


@nox.session(python=PYTHON)
def agreement(session: nox.Session) -> None:
    """Planner vs kube-scheduler on both fleets, longer than CI: `-- --seed N --refusals R`."""
    _e2e_env(session)
    session.chdir(ROOT)
    session.run("python", "-m", "isvc_testbed.agreement", *session.posargs)


@nox.session(python=PYTHON)
def up(session: nox.Session) -> None:
    """Bring up the local cluster, install the module, and show the README order reaching Ready."""
    _e2e_env(session)
    session.chdir(ROOT)
    session.run("python", "-m", "isvc_testbed.demo", "up", "--state-dir", str(STATE), *session.posargs)


@nox.session(python=PYTHON)
def down(session: nox.Session) -> None:
    """Tear the local cluster down: every process it started and its temp dir."""
    _install(session, "isvc-api")
    session.install(f"-e{ROOT / 'e2e'}")
    session.chdir(ROOT)
    session.run("python", "-m", "isvc_testbed.demo", "down", "--state-dir", str(STATE))


@nox.session(python=PYTHON)
def crds(session: nox.Session) -> None:
    """Regenerate crds/ and docs/CR.md from the isvc-api models."""
    _install(session, "isvc-api")
    session.chdir(ROOT)
    session.run("isvc-crdgen", "crds")
    session.run("python", "docs/tools/crd_reference.py")


if __name__ == "__main__":
    sys.exit("run with nox")
