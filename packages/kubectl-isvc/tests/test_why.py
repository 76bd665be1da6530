"""`why` on recorded orders: the first condition that is not True, the FAQ's answer, the evidence, and
what could not be read."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubectl_isvc import Exit, Lang, Verdict, Who, load_faq, why
from kubectl_isvc._render import Style, render_why

NOW = datetime(2026, 5, 1, 10, 5, tzinfo=UTC)
NS = "team-a"
CRD = "/apis/ai.deckhouse.io/v1alpha1/namespaces/team-a"
FORBIDDEN_CLAIMS = (
    'resourceclaims.resource.k8s.io is forbidden: User "alice" cannot list resource '
    '"resourceclaims" in API group "resource.k8s.io" in the namespace "team-a"'
)
FORBIDDEN_PODS = (
    'pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace "team-a"'
)


def _objects(case: dict[str, Any]) -> dict[str, Any]:
    order = case["order"]
    name = order["metadata"]["name"]
    objects: dict[str, Any] = {
        f"{CRD}/inferenceservices/{name}": order,
        f"/api/v1/namespaces/{NS}/events": case.get("events", []),
    }
    if "plan" in case:
        objects[f"{CRD}/launchplans/{case['plan']['metadata']['name']}"] = case["plan"]
    objects["/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims"] = case.get("claims", [])
    objects["/api/v1/namespaces/team-a/pods"] = case.get("pods", [])
    return objects


def _as_alice(recorded: Any, case: dict[str, Any]) -> Any:
    """Alice with the module's editor role alone: orders, plans and events, but no claims and no pods."""
    return recorded(
        _objects(case),
        denied={
            "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims": FORBIDDEN_CLAIMS,
            "/api/v1/namespaces/team-a/pods": FORBIDDEN_PODS,
        },
    )


def test_a_planned_refusal_names_the_reason_whose_fix_and_the_faqs_words(recorded: Any, data: Any) -> None:
    reader = _as_alice(recorded, data("orders.yaml")["nocap"])
    d = why(reader, NS, "nocap-3", load_faq(), Lang.EN)
    assert (d.verdict, d.exit_code, d.condition, d.status, d.reason) == (
        Verdict.NOT_SERVING,
        Exit.REFUSED,
        "Planned",
        "False",
        "NoCapacity",
    )
    assert d.faq is not None and d.faq.who == Who.WAIT and d.faq.whose == "nobody: wait"
    assert d.faq.link == "module/docs/FAQ.md#my-order-says-nocapacity"
    assert d.faq.paragraphs[0].startswith("Nothing the order is allowed to use is free right now.")
    assert [e.reason for e in d.events] == ["Resolved", "NoCapacity"]  # oldest first
    assert (
        "list",
        f"/api/v1/namespaces/{NS}/events",
        {"labels": None, "fields": "involvedObject.kind=InferenceService,involvedObject.name=nocap-3"},
    ) in reader.calls


def test_what_alice_may_not_read_is_said_plainly_with_the_api_servers_words(recorded: Any, data: Any) -> None:
    d = why(_as_alice(recorded, data("orders.yaml")["nocap"]), NS, "nocap-3", load_faq(), Lang.EN)
    assert [(u.what, u.status) for u in d.unread] == [
        ("ResourceClaims of team-a/nocap-3", 403),
        ("Pods of team-a/nocap-3", 403),
    ]
    assert d.unread[0].why.startswith(FORBIDDEN_CLAIMS)
    assert "the namespace's view (or edit) role does" in d.unread[0].why
    text = render_why(d, Style(False), 110, NOW)
    assert "Could not read" in text and 'User "alice" cannot list resource "pods"' in text
    assert d.exit_code == Exit.REFUSED  # what could not be read does not change what the status says


def test_a_serving_order_exits_0_with_its_plan_claims_and_pods(recorded: Any, data: Any) -> None:
    reader = recorded(_objects(data("orders.yaml")["serving"]))
    d = why(reader, NS, "support-llm", load_faq(), Lang.EN)
    assert (d.verdict, d.exit_code, d.reason, d.faq) == (Verdict.SERVING, Exit.SERVING, "Serving", None)
    assert d.plan is not None
    assert (d.plan.accelerator, d.plan.share_percent, d.plan.context_length) == (
        "NVIDIA H100 80GB HBM3",
        30,
        32768,
    )
    assert d.plan.flags == [
        "--served-model-name support-llm",
        "--gpu-memory-utilization 0.29",
        "--max-model-len 32768",
        "--max-num-seqs 16",
        "--enable-auto-tool-choice",
        "--tool-call-parser hermes",
    ]
    # issue 42: what the launch serves, as the compiled runtime states it (over the plan's estimate)
    assert (d.plan.kv_cache_tokens, d.plan.concurrent_requests, d.plan.request_tokens) == (34389, 16, 2048)
    assert "Serves: 16 requests of 2,048 tokens at once, a KV cache of 34,389 tokens, requests of up to" in (
        render_why(d, Style(False), 140, NOW)
    )
    assert [(c.allocated, c.devices, c.reserved_for) for c in d.claims] == [
        (True, ["gpu-h100-0/gpu-0 (shares=30)"], ["support-llm-6c9-x1"])
    ]
    assert [(p.name, p.phase, p.scheduled) for p in d.pods] == [("support-llm-6c9-x1", "Running", True)]
    assert d.unread == []
    assert not [c for c in reader.calls if c[0] == "text"]  # a healthy container's output is not read


def test_a_degraded_order_serves_and_names_scale_up_blocked(recorded: Any, data: Any) -> None:
    case = data("orders.yaml")["serving"]
    case["order"]["status"]["phase"] = "Degraded"
    case["order"]["status"]["conditions"][-1] = {
        "type": "ScalingHealthy",
        "status": "False",
        "reason": "ScaleUpBlocked",
        "message": "Preemption took the room.",
    }
    d = why(recorded(_objects(case)), NS, "support-llm", load_faq(), Lang.EN)
    assert (d.exit_code, d.condition, d.reason) == (Exit.SERVING, "ScalingHealthy", "ScaleUpBlocked")
    assert d.faq is not None and d.faq.who == Who.WAIT


def test_a_serving_order_whose_class_is_gone_serves_and_names_class_not_found(
    recorded: Any, data: Any
) -> None:
    """Issue 31: an order that keeps answering while an earlier condition refuses is Degraded: `why` says it
    serves (exit 0) and what does not hold."""
    case = data("orders.yaml")["serving"]
    status = case["order"]["status"]
    status["phase"], status["reason"] = "Degraded", "ClassNotFound"
    status["conditions"][0] = {
        "type": "ClassResolved",
        "status": "False",
        "reason": "ClassNotFound",
        "message": "spec.inferenceServiceClassName names 'gone', and no such class exists.",
    }
    d = why(recorded(_objects(case)), NS, "support-llm", load_faq(), Lang.EN)
    assert (d.verdict, d.exit_code, d.condition, d.reason) == (
        Verdict.SERVING,
        Exit.SERVING,
        "ClassResolved",
        "ClassNotFound",
    )
    assert d.faq is not None and d.faq.who == Who.USER
    assert any("The endpoint answers" in n for n in d.notes)


def test_a_crashing_workload_shows_the_schedulers_words_and_the_containers_last_output(
    recorded: Any, data: Any
) -> None:
    case = data("orders.yaml")["crashing"]
    reader = recorded(_objects(case), logs=case["logs"])
    d = why(reader, NS, "crashing", load_faq(), Lang.EN)
    assert (d.exit_code, d.condition, d.reason) == (Exit.REFUSED, "WorkloadReady", "WorkloadStartupFailed")
    assert d.faq is not None and d.faq.who == Who.DEPENDS
    unscheduled, crashing = d.pods
    assert unscheduled.scheduler_message == "0/5 nodes are available: 5 cannot allocate all claims."
    container = crashing.containers[0]
    assert (container.state, container.reason, container.restart_count) == ("waiting", "CrashLoopBackOff", 3)
    assert container.output == ["INFO loading weights", "torch.OutOfMemoryError: CUDA out of memory."]
    assert (
        "text",
        "/api/v1/namespaces/team-a/pods/crashing-7d-x2/log",
        {"container": "runtime", "tailLines": "12", "previous": "true"},
    ) in reader.calls
    assert d.startup_output == ["torch.OutOfMemoryError: CUDA out of memory."]
    assert d.claims[0].allocated is False
    assert any("generation 2" in n and "at 3" in n for n in d.notes)
    assert "status.launchPlanName names crashing, which is gone" in " ".join(d.notes)


def test_an_order_not_judged_yet_cannot_be_told(recorded: Any, data: Any) -> None:
    d = why(recorded(_objects(data("orders.yaml")["fresh"])), NS, "fresh", load_faq(), Lang.EN)
    assert (d.verdict, d.exit_code) == (Verdict.UNKNOWN, Exit.UNKNOWN)
    assert "has not judged it" in d.notes[0]


def test_not_judged_is_could_not_tell_with_the_faqs_meaning(recorded: Any, data: Any) -> None:
    d = why(recorded(_objects(data("orders.yaml")["notjudged"])), NS, "notjudged", load_faq(), Lang.EN)
    assert (d.exit_code, d.condition, d.reason) == (Exit.UNKNOWN, "ModelResolved", "NotJudged")
    assert d.meaning is not None and "controller's log" in d.meaning.meaning


def test_a_missing_order_or_an_api_server_that_does_not_answer_cannot_be_told(recorded: Any) -> None:
    d = why(recorded({}), NS, "nope", load_faq(), Lang.EN)
    assert (d.exit_code, [u.status for u in d.unread]) == (Exit.UNKNOWN, [404])
    assert d.notes == ["There is no order nope in namespace team-a."]
    reader = recorded({})
    reader.down.add(f"{CRD}/inferenceservices/nope")
    d = why(reader, NS, "nope", load_faq(), Lang.EN)
    assert d.exit_code == Exit.UNKNOWN and "did not answer" in d.unread[0].why


def test_the_faqs_words_come_in_russian_for_a_russian_locale(recorded: Any, data: Any) -> None:
    d = why(_as_alice(recorded, data("orders.yaml")["nocap"]), NS, "nocap-3", load_faq(), Lang.RU)
    assert d.faq is not None
    assert (d.faq.title, d.faq.whose, d.faq.link) == (
        "Заказ сообщает NoCapacity",
        "ничья: ждать",
        "module/docs/FAQ.ru.md#заказ-сообщает-nocapacity",
    )
    text = render_why(d, Style(False), 110, NOW)
    assert "Чья забота: ничья: ждать" in text and "ждать — ничья" not in text
    assert "Не удалось прочитать" in text


def test_the_screen_is_one_aligned_table_of_conditions_then_the_answer(recorded: Any, data: Any) -> None:
    d = why(_as_alice(recorded, data("orders.yaml")["nocap"]), NS, "nocap-3", load_faq(), Lang.EN)
    lines = render_why(d, Style(False), 110, NOW).splitlines()
    assert lines[0] == "Order team-a/nocap-3 · phase Pending · not serving (exit 1)"
    header = lines[2]
    rows = lines[3:9]
    assert header.split() == ["CONDITION", "STATUS", "REASON", "AGE", "MESSAGE"]
    for column in ("STATUS", "REASON", "AGE"):
        at = header.index(column)
        assert all(row[at - 1] == " " and row[at] != " " for row in rows), column
    assert rows[2].startswith(
        "Planned         False    NoCapacity              4m   The model needs 17.3 GiB"
    )
    assert all(len(line) <= 110 for line in lines)
    assert "Planned is False: NoCapacity" in lines
    assert "Whose fix: nobody: wait" in lines  # issue 31: once, in the FAQ's words (it read it twice)
    assert "\033[" not in "\n".join(lines)
