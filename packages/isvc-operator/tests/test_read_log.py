"""Records.read_log: the output a WorkloadStartupFailed message quotes, from the right instance."""

from __future__ import annotations

from typing import Any

from isvc_operator._kube.records import Records


class _Core:
    """read_namespaced_pod_log answering per `previous` flag, as the kubelet does through the API server."""

    def __init__(self, previous: str, current: str) -> None:
        self.answers = {True: previous, False: current}
        self.asked: list[bool] = []

    def read_namespaced_pod_log(self, pod: str, namespace: str, **kw: Any) -> str:
        self.asked.append(kw["previous"])
        return self.answers[kw["previous"]]


def _cluster(core: _Core) -> Records:
    return Records(core)  # type: ignore[arg-type]


def test_the_previous_instance_is_read_first() -> None:
    core = _Core(previous="error: the previous instance\n", current="starting again\n")
    assert _cluster(core).read_log("ns", "p-0", "server") == "error: the previous instance\n"
    assert core.asked == [True]


def test_a_removed_previous_instance_is_not_taken_for_output() -> None:
    # the kubelet keeps one dead instance: while the current one has itself just exited (Error, restarts 1)
    # the one before is gone, and the answer is 200 with this notice; the real lines are the current one's
    gone = "unable to retrieve container logs for containerd://dc833a8f450a3acaedd2b99ad33b83a2fcb63540"
    core = _Core(previous=gone, current="E llama_model_load: error loading model: model is corrupted\n")
    assert _cluster(core).read_log("ns", "p-0", "server") == (
        "E llama_model_load: error loading model: model is corrupted\n"
    )
    assert core.asked == [True, False]


def test_a_removed_log_file_of_the_previous_instance_is_not_taken_for_output() -> None:
    gone = (
        'failed to try resolving symlinks in path "/var/log/pods/team-a_tiny-cut-0_b9f1/server/0.log": '
        "lstat /var/log/pods/team-a_tiny-cut-0_b9f1/server/0.log: no such file or directory"
    )
    core = _Core(previous=gone, current="E srv  llama_server: exiting due to model loading error\n")
    assert _cluster(core).read_log("ns", "p-0", "server") == (
        "E srv  llama_server: exiting due to model loading error\n"
    )


def test_nothing_readable_is_none() -> None:
    gone = "unable to retrieve container logs for containerd://0123"
    assert _cluster(_Core(previous=gone, current="")).read_log("ns", "p-0", "server") is None
