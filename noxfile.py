"""The one entry point: `nox -l` lists the sessions; `nox` runs the whole test suite."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import signal
import subprocess
import sys
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path

import nox

ROOT = Path(__file__).parent
PACKAGES = [
    "isvc-api",
    "isvc-catalog",
    "isvc-planner-client",
    "isvc-ledger",
    "isvc-planner",
    "isvc-runtime-recipes",
    "isvc-workload",
    "isvc-health",
    "isvc-operator",
    "isvc-model-cache",
    "isvc-testing",
    "kubectl-isvc",
]
# What each package needs from its siblings, installed from the tree (pip cannot see them on an index).
LOCAL_DEPS = {
    "isvc-api": [],
    "isvc-catalog": ["isvc-api", "isvc-planner-client", "isvc-ledger", "isvc-planner", "isvc-testing"],
    "isvc-planner-client": ["isvc-api"],
    "isvc-ledger": ["isvc-api", "isvc-planner-client"],
    "isvc-planner": ["isvc-api", "isvc-planner-client", "isvc-ledger", "isvc-catalog", "isvc-testing"],
    "isvc-runtime-recipes": ["isvc-api"],
    "isvc-workload": [
        "isvc-api",
        "isvc-planner-client",
        "isvc-ledger",
        "isvc-catalog",
        "isvc-planner",
        "isvc-testing",
    ],
    "isvc-health": ["isvc-api"],
    # the planner and test support: tests
    "isvc-operator": [p for p in PACKAGES if p not in ("isvc-operator", "isvc-model-cache", "kubectl-isvc")],
    # standalone; its tests: the stand-in Hub (isvc-testing) as the upstream
    "isvc-model-cache": [
        "isvc-api",
        "isvc-planner-client",
        "isvc-ledger",
        "isvc-catalog",
        "isvc-planner",
        "isvc-testing",
    ],
    "isvc-testing": ["isvc-api", "isvc-catalog", "isvc-planner-client", "isvc-ledger", "isvc-planner"],
    "kubectl-isvc": ["isvc-api", "isvc-planner-client", "isvc-ledger"],
}
PYTHON = "3.11"
STATE = ROOT / ".nox" / "cluster"

nox.options.default_venv_backend = "uv|virtualenv"
# e2e-realnode: the e2e suite, and beside it the real node on which the chart's Deployments and an order's
# llama.cpp server run as real pods (root; e2e/README.md)
nox.options.sessions = ["lint", "tests", "chart", "e2e-realnode"]
nox.options.reuse_existing_virtualenvs = True


def _install(session: nox.Session, *packages: str, extras: str = "test") -> None:
    session.install(*_editables(packages, extras))
    if any(_uses_kubernetes(p) for p in packages):
        _kubernetes(session, "highest")


def _editables(packages: Sequence[str], extras: str = "test") -> list[str]:
    """pip's arguments installing `packages` (with `extras`) and the siblings they need from the tree."""
    deps: list[str] = []
    for package in packages:
        for dep in LOCAL_DEPS[package]:
            if dep not in deps:
                deps.append(dep)
    args = [f"-e{ROOT / 'packages' / d}" for d in deps if d not in packages]
    return args + [f"-e{ROOT / 'packages' / p}[{extras}]" for p in packages]


def _kubernetes_range() -> dict[str, str]:
    """The kubernetes client's range each package (and the test bed) accepts, by distribution directory."""
    ranges = {}
    for pyproject in [*sorted((ROOT / "packages").glob("*/pyproject.toml")), ROOT / "e2e" / "pyproject.toml"]:
        for requirement in tomllib.loads(pyproject.read_text())["project"].get("dependencies", []):
            if re.split(r"[<>=!~ ;\[]", requirement, maxsplit=1)[0] == "kubernetes":
                ranges[pyproject.parent.name] = requirement.removeprefix("kubernetes").strip()
    return ranges


def _uses_kubernetes(package: str) -> bool:
    """Whether the package, or a sibling its tests install, needs the kubernetes client."""
    ranges = _kubernetes_range()
    return package in ranges or any(dep in ranges for dep in LOCAL_DEPS[package])


def _kubernetes(session: nox.Session, end: str) -> None:
    """Install the kubernetes client at one end of the one range every package accepts: `lowest`, the release
    its lower bound names, or `highest`, the newest the index has within it. CI runs the unit tests of the
    packages that use it at both ends, and the e2e suite too (issue 45: a client the range admitted broke a
    write the tests never ran with it)."""
    spec, lowest = _kubernetes_ends(session)
    if end == "lowest":
        session.install(f"kubernetes=={lowest}")
    elif session.venv_backend == "uv":
        session.install("--upgrade-package", "kubernetes", f"kubernetes{spec}")
    else:
        session.install("--upgrade", f"kubernetes{spec}")


def _kubernetes_ends(session: nox.Session) -> tuple[str, str]:
    """The one range of the kubernetes client every package accepts, and the release its lower bound names."""
    ranges = set(_kubernetes_range().values())
    if len(ranges) != 1:
        session.error(
            f"every package must accept one range of the kubernetes client, the one CI tests: {ranges}"
        )
    [spec] = ranges
    lowest = re.search(r">=\s*([0-9][0-9.]*)", spec)
    if lowest is None:
        session.error(f"the kubernetes client's range names no lower bound: {spec}")
    return spec, lowest.group(1)


def _lowest_env(session: nox.Session) -> Path:
    """A virtualenv beside the session's, with the same packages and the test bed but the lowest kubernetes
    client they accept (uv, as `_wheels`); kept and brought up to date like the session's own."""
    _, lowest = _kubernetes_ends(session)
    where = ROOT / ".nox" / f"{session.name}-lowest"
    python = where / "bin" / "python"
    if not python.exists():
        session.run(
            "uv", "venv", "--quiet", "--python", str(Path(session.bin) / "python"), str(where), external=True
        )
    session.run(
        "uv",
        "pip",
        "install",
        "--quiet",
        "--python",
        str(python),
        *_editables(PACKAGES),
        f"-e{ROOT / 'e2e'}",
        f"kubernetes=={lowest}",
        external=True,
    )
    return where


def _at_each_end(session: nox.Session, run: Callable[[], object], whole: bool) -> None:
    """`run` with the highest kubernetes client (what `_install` left), then with the lowest when `whole`;
    ISVC_KUBERNETES=highest|lowest|both chooses otherwise."""
    ends = os.environ.get("ISVC_KUBERNETES") or ("both" if whole else "highest")
    if ends not in ("both", "highest", "lowest"):
        session.error(f"ISVC_KUBERNETES is {ends!r}: highest, lowest or both")
    if ends != "lowest":
        session.log("kubernetes client: the highest the packages accept")
        run()
    if ends != "highest":
        _kubernetes(session, "lowest")
        session.log("kubernetes client: the lowest the packages accept")
        run()


@nox.session(python=PYTHON)
@nox.parametrize("package", PACKAGES, ids=PACKAGES)
def tests(session: nox.Session, package: str) -> None:
    """Unit tests of one package in its own environment (no cluster); `-- -k expr` passes to pytest. A package
    that uses the kubernetes client is tested with the lowest and the highest one it accepts."""
    _install(session, package)
    session.chdir(ROOT)
    run = functools.partial(session.run, "pytest", f"packages/{package}/tests", "-q", *session.posargs)
    if _uses_kubernetes(package):
        _at_each_end(session, run, whole=True)
    else:
        run()


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff (check and format), mypy --strict per package, import-linter layering, and generated files without drift."""
    _install(session, *PACKAGES)
    session.install(
        "ruff==0.17.6",
        "mypy>=1.11",
        "import-linter>=2.10,<3",  # acyclic_siblings
        "types-PyYAML",
        "types-cachetools",
        "pytest>=8",
        "pymarkdownlnt>=0.9.26,<1",
    )
    session.chdir(ROOT)
    session.run("ruff", "check", "packages", "e2e", "noxfile.py", "tests", "tools")
    session.run("ruff", "format", "--check", "packages", "e2e", "noxfile.py", "tests", "tools")
    session.install(f"-e{ROOT / 'e2e'}")
    for package in PACKAGES:
        session.run("mypy", "--strict", f"packages/{package}/src")
    session.run("mypy", "--strict", "e2e/isvc_testbed")
    session.run("lint-imports")
    session.run("isvc-crdgen", "module/crds", "--check")
    session.run("python", "tools/crd_reference.py", "--check")
    session.run("python", "tools/faqgen.py", "--check")
    session.run("pytest", "tests/docs", "-q")


@nox.session(python=PYTHON)
def chart(session: nox.Session) -> None:
    """helm lint, helm-unittest, schema cases, rendered args vs each parser, alert rules run by Prometheus."""
    session.install("pytest>=8", "pyyaml>=6", "jsonschema>=4")
    # The binaries whose parsers read the rendered Deployment args (tests/module/test_rendered_args.py).
    runtime = [
        "isvc-api",
        "isvc-planner-client",
        "isvc-catalog",
        "isvc-runtime-recipes",
        "isvc-workload",
        "isvc-health",
        "isvc-ledger",
        "isvc-planner",
        "isvc-operator",
        "isvc-model-cache",
    ]
    session.install(*[f"-e{ROOT / 'packages' / p}" for p in runtime])
    # helm, untt, and isvc-rulecheck (tools/rulecheck), which tests/module/test_alert_rules.py runs over the
    # rendered PrometheusRules
    binaries = _binaries(session)
    session.chdir(ROOT)
    for values in ("plain", "deckhouse"):
        session.run(
            str(binaries / "helm"),
            "lint",
            "--strict",
            "module",
            "--values",
            f"module/tests/values/{values}.yaml",
            external=True,
        )
    session.run(str(binaries / "untt"), "-f", "tests/*_test.yaml", "module", external=True)
    session.run("pytest", "tests/module", "-q")


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
    """End-to-end tests on a local control plane, or on your cluster with `-- --kubeconfig PATH`. The whole
    suite runs with the highest and then the lowest kubernetes client the packages accept; a part of it (a
    path, `-k`) with the highest alone, unless ISVC_KUBERNETES=lowest|both."""
    _e2e_env(session)
    session.chdir(ROOT)
    if "--kind" in session.posargs:
        session.error(
            "--kind is not supported: create a kind cluster and pass `--kubeconfig PATH` "
            "(e2e/README.md, Bring your own cluster)"
        )
    # `nox -s e2e -- e2e/tests/FILE.py` runs that file alone; without a path, the whole suite.
    # `-- --kubeconfig PATH [--no-kwok]`: against that cluster, not one started here (e2e/tests/conftest.py).
    paths = [] if any(a.startswith("e2e/") for a in session.posargs) else ["e2e/tests"]
    part = not paths or any(a.startswith(("-k", "-m")) for a in session.posargs)
    _at_each_end(
        session,
        lambda: session.run(
            "pytest", *paths, "-q", "-p", "no:cacheprovider", *_e2e_workers(session), *session.posargs
        ),
        whole=not part,
    )


def _e2e_workers(session: nox.Session) -> list[str]:
    """Three pytest-xdist workers, each with a control plane of its own, files shared out whole between them: the
    suite waits on control loops far more than it computes (on 2 cores: 8 min 1 s in two workers, 6 min 6 s in
    three). One process against a cluster brought with --kubeconfig or ISVC_TESTBED_STATE (its namespaces are
    shared), when -n is given, or with ISVC_E2E_WORKERS=1."""
    workers = os.environ.get("ISVC_E2E_WORKERS", "3")
    shared = "--kubeconfig" in session.posargs or os.environ.get("ISVC_TESTBED_STATE")
    if shared or workers == "1" or any(a == "-n" or a.startswith("-n") for a in session.posargs):
        return []
    return ["-n", workers, "--dist", "loadfile"]


@nox.session(python=PYTHON)
def realnode(session: nox.Session) -> None:
    """A real kubelet + containerd node beside KWOK (root): the chart's Deployments run as real pods."""
    _need_root(session)
    _install(session, *PACKAGES)
    session.install(f"-e{ROOT / 'e2e'}")
    env = _realnode_env(session)
    session.chdir(ROOT)
    session.run(*_realnode_pytest(session), env=env)


def _realnode_env(session: nox.Session) -> dict[str, str]:
    """What the real-node tests need besides the packages (root): its binaries and Debian packages, and the
    module's images for this tree; returns the environment its pytest runs with."""
    _need_root(session)
    session.install("pip>=24")  # build-bins.sh fetches the llama-cpp-python sdist with pip (hash-checked)
    session.run("bash", str(ROOT / "e2e" / "tools" / "build-bins.sh"), "realnode", external=True)
    # the module's images for this tree (cached by their inputs; `nox -s build` checks the wheels alone); the
    # tests import exactly these archives: the chart's controller, planner and model cache, and the model
    # fetcher that downloads the tiny model before llama.cpp's server (built by build-bins.sh) serves it.
    manifest = Path(session.create_tmp()) / "images.txt"
    _wheels(session)
    _build_images(session, manifest, "controller planner modelFetcher modelCache")
    # ISVC_NOX_PYTHON: the Python running this nox, with which test_demo_real_node.py runs `nox -s up`
    return {"ISVC_IMAGES_MANIFEST": str(manifest), "ISVC_NOX_PYTHON": sys.executable}


def _need_root(session: nox.Session) -> None:
    if os.geteuid() != 0:
        session.error(
            "the real node needs root (network namespaces, cgroups, mounts, apt-get for runc, CNI "
            "plugins, umoci, buildah): run `nox -s realnode` as root (e2e/README.md, A real node)"
        )


def _realnode_pytest(session: nox.Session) -> list[str]:
    paths = [] if any(a.startswith("e2e/") for a in session.posargs) else ["e2e/tests/realnode"]
    return ["pytest", *paths, "-q", "-p", "no:cacheprovider", "--real-node", *session.posargs]


@nox.session(name="e2e-realnode", python=PYTHON)
def e2e_realnode(session: nox.Session) -> None:
    """`e2e` (the whole suite, at both client ends) and `realnode` at once, as `nox` runs them: the real node
    waits on its kubelet and llama.cpp far more than it computes (2 of its 12 minutes on the CPU), so beside
    the e2e suite it adds little to the run. Its output follows the e2e suite's; either failing fails this."""
    if session.posargs:
        session.error("run a part with `nox -s e2e -- ...` or `nox -s realnode -- ...`")
    _need_root(session)
    _e2e_env(session)
    env = _realnode_env(session)
    lowest = _lowest_env(session)  # the real-node tests import from the session's own meanwhile
    session.chdir(ROOT)
    log = Path(session.create_tmp()) / "realnode.log"
    with log.open("wb") as out:
        beside = subprocess.Popen(
            _realnode_pytest(session),
            cwd=ROOT,
            env={**_venv_env(Path(session.virtualenv.location)), **env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    session.log(f"the real-node tests run beside the e2e suite (output in {log})")
    failed = []
    try:
        suite = ["pytest", "e2e/tests", "-q", "-p", "no:cacheprovider", *_e2e_workers(session)]
        for end, where in (("highest", Path(session.virtualenv.location)), ("lowest", lowest)):
            session.log(f"kubernetes client: the {end} the packages accept")
            if subprocess.run(suite, cwd=ROOT, env=_venv_env(where)).returncode:
                failed.append(f"the e2e suite with the {end} kubernetes client")
    finally:
        code = beside.wait()
        session.log(f"the real-node tests, run beside the e2e suite (exit {code}):")
        sys.stdout.write(log.read_text(errors="replace"))
        sys.stdout.flush()
    if code:
        failed.append("the real-node tests")
    if failed:
        session.error(f"failed: {', '.join(failed)}")


def _venv_env(where: Path) -> dict[str, str]:
    """This process's environment with the virtualenv at `where` first on PATH, as nox runs a session's commands."""
    return {
        **os.environ,
        "PATH": f"{where / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "VIRTUAL_ENV": str(where),
    }


@nox.session(python=PYTHON)
def bench(session: nox.Session) -> None:
    """Benchmarks: the planner's latency, throughput and packing (.bench/planner.json), then the controller's
    at 200 orders with the product's health period (.bench/operator.json); arguments go to the planner's."""
    _e2e_env(session)
    session.chdir(ROOT)
    session.run("python", "-m", "isvc_testing.bench", *session.posargs)
    session.run(
        "python",
        "-m",
        "isvc_testbed.bench",
        "--health-period",
        "30",
        "--out",
        str(ROOT / ".bench" / "operator.json"),
    )


@nox.session(name="bench-operator", python=PYTHON)
def bench_operator(session: nox.Session) -> None:
    """The controller on a real test bed: order→Ready, API writes, RSS/CPU, restart; .bench/operator.json."""
    _e2e_env(session)
    session.chdir(ROOT)
    session.run("python", "-m", "isvc_testbed.bench", *session.posargs)


@nox.session(python=PYTHON)
def chaos(session: nox.Session) -> None:
    """Churn orders while killing the controller, the planner and the API server; .bench/chaos.json."""
    _e2e_env(session)
    session.chdir(ROOT)
    session.run("python", "-m", "isvc_testbed.chaos", *session.posargs)


@nox.session(python=PYTHON)
def fuzz(session: nox.Session) -> None:
    """The hostile-input suite with 10,000 generated orders (CI runs 2,000): `-- --hypothesis-seed N`."""
    _e2e_env(session)
    session.chdir(ROOT)
    orders = os.environ.get("ISVC_FUZZ_ORDERS", "10000")
    session.run(
        "pytest",
        "e2e/tests/test_isvc_hostile.py",
        "-q",
        "-s",
        "-p",
        "no:cacheprovider",
        *session.posargs,
        env={"ISVC_FUZZ_ORDERS": orders},
    )


@nox.session(python=PYTHON)
def agreement(session: nox.Session) -> None:
    """Planner vs kube-scheduler on both fleets, longer than CI: `-- --seed N --refusals R`."""
    _e2e_env(session)
    session.chdir(ROOT)
    session.run("python", "-m", "isvc_testbed.agreement", *session.posargs)


@nox.session(python=PYTHON)
def up(session: nox.Session) -> None:
    """Bring up the local cluster, install the module, and show the README order reaching Ready.

    `-- --real-node` (root): alice's order for a tiny model served by llama.cpp on a real node, in the
    foreground until Ctrl-C, which tears it all down (e2e/README.md, A real node)."""
    if "--real-node" in session.posargs and os.geteuid() != 0:
        session.error(
            "the real node needs root (network namespaces, cgroups, mounts): run "
            "`nox -s up -- --real-node` as root (e2e/README.md, A real node)"
        )
    _e2e_env(session)
    session.chdir(ROOT)
    argv = ["python", "-m", "isvc_testbed.demo", "up", "--state-dir", str(STATE), *session.posargs]
    if "--real-node" not in session.posargs:
        session.run(*argv)
        return
    # the real node's binaries first (`build-bins.sh realnode` is long: the error names it), then the images
    # for this tree its orders' pods run, as `nox -s realnode` builds them (cached by their inputs): the model
    # fetcher, and the controller's, whose isvc-meter counts the runtime's answers in every order's pod
    session.run("python", "-m", "isvc_testbed.demo", "check-real-node", "--state-dir", str(STATE))
    manifest = Path(session.create_tmp()) / "images.txt"
    _wheels(session)
    _build_images(session, manifest, "controller modelFetcher")
    session.chdir(ROOT)
    _run_handing_on_signals(session, argv, {"ISVC_IMAGES_MANIFEST": str(manifest)})


def _run_handing_on_signals(session: nox.Session, argv: list[str], env: dict[str, str]) -> None:
    """Run `argv` in the session's environment, handing SIGTERM and SIGINT on to it as SIGINT and waiting for it:
    the demo tears the real node down on either. (nox's own run waits out a Ctrl-C the terminal sent the whole
    group, and a SIGTERM to nox alone ended nox and left the demo and the real node running: issue 45.)"""
    bin_dir = str(session.bin)
    path = os.pathsep.join([bin_dir, os.environ.get("PATH", "")])
    full = {**os.environ, **{k: v for k, v in session.env.items() if v is not None}, **env, "PATH": path}
    session.log(" ".join(argv))
    proc = subprocess.Popen([str(Path(bin_dir) / argv[0]), *argv[1:]], env=full, cwd=ROOT)

    def hand_on(signum: int, frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGINT)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, hand_on)
    while True:
        with contextlib.suppress(InterruptedError):
            code = proc.wait()
            break
    if code != 0:
        session.error(f"{' '.join(argv)} ended with {code}")


@nox.session(python=PYTHON)
def down(session: nox.Session) -> None:
    """Tear the local cluster down: every process it started and its temp dir."""
    # the siblings e2e/pyproject.toml names, from the tree (pip cannot find them on an index)
    _install(
        session, "isvc-api", "isvc-planner", "isvc-planner-client", "isvc-runtime-recipes", "isvc-workload"
    )
    session.install(f"-e{ROOT / 'e2e'}")
    session.chdir(ROOT)
    session.run("python", "-m", "isvc_testbed.demo", "down", "--state-dir", str(STATE))


def _wheels(session: nox.Session) -> Path:
    """Every package's wheel, fresh, into dist/ (the only wheels there: pip download adds the rest)."""
    dist = ROOT / "dist"
    for old in dist.glob("*.whl"):
        old.unlink()
    for package in PACKAGES:
        session.run(
            "uv",
            "build",
            "--quiet",
            "--wheel",
            "--out-dir",
            str(dist),
            str(ROOT / "packages" / package),
            external=True,
        )
    return dist


@nox.session(python=PYTHON)
def build(session: nox.Session) -> None:
    """Wheels into dist/; each package, installed alone in a clean venv, imports and declares its imports."""
    dist = _wheels(session)
    venvs = Path(session.create_tmp()) / "alone"
    for package in PACKAGES:
        venv = venvs / package
        python = venv / "bin" / "python"
        session.run("uv", "venv", "--quiet", "--clear", "--python", PYTHON, str(venv), external=True)
        # Siblings only from dist/ (pinned ==, lockstep; refreshed, since uv caches a wheel by name and
        # version); third-party packages from the index.
        refresh = [arg for p in PACKAGES for arg in ("--refresh-package", p)]
        session.run(
            "uv",
            "pip",
            "install",
            "--quiet",
            "--python",
            str(python),
            "--find-links",
            str(dist),
            *refresh,
            f"{package}=={_version()}",
            external=True,
        )
        session.run(str(python), str(ROOT / "tools" / "check_installed.py"), package, external=True)


@nox.session(python=PYTHON)
def images(session: nox.Session) -> None:
    """Build the controller, planner, model-fetcher and model-cache images with buildah, no Docker daemon (cached)."""
    build(session)
    _build_images(session)


def _build_images(session: nox.Session, manifest: Path | None = None, names: str | None = None) -> None:
    """tools/build-images.sh over the wheels in dist/; `manifest` gets the archive of each image built;
    `names` (e.g. "controller planner") builds only those."""
    session.install("pip>=24")
    env = {
        "PYTHON": "python",
        **({"ISVC_IMAGES_MANIFEST": str(manifest)} if manifest else {}),
        **({"ISVC_IMAGE_NAMES": names} if names else {}),
    }
    session.run("bash", str(ROOT / "tools" / "build-images.sh"), env=env, external=True)


def _version() -> str:
    """The one lockstep version of the packages and the module (module/Chart.yaml)."""
    for line in (ROOT / "module" / "Chart.yaml").read_text().splitlines():
        if line.startswith("version:"):
            return line.split(":", 1)[1].strip()
    raise RuntimeError("module/Chart.yaml has no version")


# What the model-fetcher image installs: the Hugging Face CLI (module/images/modelFetcher/Dockerfile).
MODEL_FETCHER = "huggingface_hub[cli]>=0.34,<1"
# The packages whose dependencies the controller, planner and model cache images install.
IMAGE_PACKAGES = [*PACKAGES[:8], "isvc-model-cache"]


@nox.session(python=PYTHON)
def lock(session: nox.Session) -> None:
    """Pin what the images install (module/images/constraints.txt) from the packages' own requirements."""
    import tomllib

    wanted = {MODEL_FETCHER}
    for package in IMAGE_PACKAGES:
        project = tomllib.loads((ROOT / "packages" / package / "pyproject.toml").read_text())["project"]
        wanted |= {r for r in project.get("dependencies", []) if not r.startswith("isvc-")}
    requirements = Path(session.create_tmp()) / "images.in"
    requirements.write_text("\n".join(sorted(wanted)) + "\n")
    out = ROOT / "module" / "images" / "constraints.txt"
    session.run(
        "uv",
        "pip",
        "compile",
        str(requirements),
        "--quiet",
        "--python-version",
        PYTHON,
        "--python-platform",
        "x86_64-manylinux_2_28",
        "--no-annotate",
        "--no-header",
        "--output-file",
        str(out),
        external=True,
    )
    pins = out.read_text()
    out.write_text(
        "# What the module images install, pinned (`nox -s lock` writes it from the packages' own\n"
        "# requirements; tools/build-images.sh and the Dockerfiles install with it; oss.yaml names\n"
        "# these versions).\n" + pins
    )


@nox.session(python=PYTHON)
def crds(session: nox.Session) -> None:
    """Regenerate module/crds/ and module/docs/CR.md from the isvc-api models."""
    _install(session, "isvc-api")
    session.chdir(ROOT)
    session.run("isvc-crdgen", "module/crds")
    session.run("python", "tools/crd_reference.py")


if __name__ == "__main__":
    sys.exit("run with nox")
