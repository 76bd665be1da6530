"""The stand-in inference server enforces per-order tokens and obeys its control calls (loopback only)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import openai
import pytest
from isvc_runtime_recipes import load_recipes
from isvc_testbed.standin import SERVED_NAME_FLAGS, StandIn, served_name

TOKENS = {("team-a", "chat"): "s3cret", ("team-a", "emb"): "other", ("team-a", "noplan"): "third"}
SERVED = {("team-a", "chat"): "Qwen/Qwen2.5-7B-Instruct", ("team-a", "emb"): "BAAI/bge-m3"}


@pytest.fixture
def standin() -> Iterator[StandIn]:
    with StandIn(lambda ns, name: TOKENS.get((ns, name)), lambda ns, name: SERVED.get((ns, name))) as s:
        yield s


def get(standin: StandIn, ns: str, name: str, path: str, token: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(f"{standin.url_for(ns, name)}{path}", headers=headers)


def test_models_answer_with_the_orders_token_and_list_exactly_the_served_name(standin: StandIn) -> None:
    r = get(standin, "team-a", "chat", "/v1/models", "s3cret")
    assert r.status_code == 200
    assert [m["id"] for m in r.json()["data"]] == ["Qwen/Qwen2.5-7B-Instruct"]


def test_an_order_without_a_compiled_runtime_lists_no_model(standin: StandIn) -> None:
    r = get(standin, "team-a", "noplan", "/v1/models", "third")
    assert (r.status_code, r.json()["data"]) == (200, [])


def test_set_model_lists_another_name_until_cleared(standin: StandIn) -> None:
    standin.set_model("team-a", "chat", "someone-else/model")
    assert [m["id"] for m in get(standin, "team-a", "chat", "/v1/models", "s3cret").json()["data"]] == [
        "someone-else/model"
    ]
    standin.set_model("team-a", "chat", None)
    assert [m["id"] for m in get(standin, "team-a", "chat", "/v1/models", "s3cret").json()["data"]] == [
        "Qwen/Qwen2.5-7B-Instruct"
    ]


def test_the_served_name_is_read_from_runtime_arguments() -> None:
    assert (
        served_name(["/models/q", "--served-model-name", "Qwen/Qwen2.5-7B-Instruct", "--port", "8000"])
        == "Qwen/Qwen2.5-7B-Instruct"
    )
    assert served_name(["-m", "/models/x.gguf", "--alias", "org/x"]) == "org/x"
    assert served_name(["--port", "8000"]) is None


@pytest.mark.parametrize("recipe", [r.name for r in load_recipes()])
def test_every_shipped_recipe_passes_the_served_name_with_a_flag_the_standin_reads(recipe: str) -> None:
    found = load_recipes().get(recipe)
    assert found is not None
    pairs = [tuple(group) for group in found.args if "{servedName}" in group]
    assert len(pairs) == 1 and pairs[0][0] in SERVED_NAME_FLAGS and pairs[0][1] == "{servedName}", pairs


def test_wrong_or_missing_token_is_unauthorized(standin: StandIn) -> None:
    assert get(standin, "team-a", "chat", "/v1/models", "other").status_code == 401
    assert get(standin, "team-a", "chat", "/v1/models").status_code == 401


def test_order_without_secret_accepts_no_token(standin: StandIn) -> None:
    assert get(standin, "team-a", "nosecret", "/v1/models", "s3cret").status_code == 401
    assert get(standin, "team-a", "nosecret", "/v1/models", "").status_code == 401


def test_order_with_authentication_none_accepts_requests_without_token(standin: StandIn) -> None:
    standin.set_auth_none("team-a", "nosecret")
    assert get(standin, "team-a", "nosecret", "/v1/models").status_code == 200


def test_failing_order_answers_503_until_healed_and_others_are_unaffected(standin: StandIn) -> None:
    standin.fail("team-a", "chat")
    assert get(standin, "team-a", "chat", "/v1/models", "s3cret").status_code == 503
    assert get(standin, "team-a", "chat", "/health").status_code == 503
    assert get(standin, "team-a", "emb", "/v1/models", "other").status_code == 200
    standin.heal("team-a", "chat")
    assert get(standin, "team-a", "chat", "/v1/models", "s3cret").status_code == 200


def test_control_endpoint_switches_failure_and_model(standin: StandIn) -> None:
    r = httpx.post(f"{standin.base_url}/_control/team-a/chat", json={"failing": True, "model": "qwen"})
    assert r.json()["failing"] is True
    assert get(standin, "team-a", "chat", "/v1/models", "s3cret").status_code == 503
    httpx.post(f"{standin.base_url}/_control/team-a/chat", json={"failing": False})
    assert get(standin, "team-a", "chat", "/v1/models", "s3cret").json()["data"][0]["id"] == "qwen"


def test_chat_embeddings_and_rerank_answer_in_openai_shape(standin: StandIn) -> None:
    auth = {"Authorization": "Bearer s3cret"}
    base = standin.url_for("team-a", "chat")
    chat = httpx.post(
        f"{base}/v1/chat/completions",
        headers=auth,
        json={"model": "chat", "messages": [{"role": "user", "content": "hi there"}]},
    )
    assert chat.json()["choices"][0]["message"]["content"] == "echo: hi there"
    emb = httpx.post(f"{base}/v1/embeddings", headers=auth, json={"input": ["a", "b"]})
    assert [d["index"] for d in emb.json()["data"]] == [0, 1]
    rr = httpx.post(
        f"{base}/v1/rerank",
        headers=auth,
        json={"query": "red apple", "documents": ["blue sky", "red apple pie"]},
    )
    assert rr.json()["results"][0]["index"] == 1


def test_requests_are_counted_per_order(standin: StandIn) -> None:
    get(standin, "team-a", "chat", "/v1/models", "s3cret")
    get(standin, "team-a", "chat", "/health")
    assert standin.requests("team-a", "chat") == 2
    assert standin.requests("team-a", "emb") == 0


def test_url_template_names_the_port_and_placeholders(standin: StandIn) -> None:
    assert standin.url_template == f"http://127.0.0.1:{standin.port}/{{namespace}}/{{name}}"


def test_a_chat_asked_to_stream_answers_in_events_the_openai_client_reads(standin: StandIn) -> None:
    """Issue 16: the stand-in ignored `stream: true`, so the openai client's streaming call yielded nothing,
    and it answered with the order's name instead of the served model's."""
    client = openai.OpenAI(base_url=f"{standin.url_for('team-a', 'chat')}/v1", api_key="s3cret")
    stream = client.chat.completions.create(
        model="Qwen/Qwen2.5-7B-Instruct", stream=True, messages=[{"role": "user", "content": "hello there"}]
    )
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "echo: hello there"
    assert {c.model for c in chunks} == {"Qwen/Qwen2.5-7B-Instruct"}
    assert chunks[-1].choices[0].finish_reason == "stop"
    whole = client.chat.completions.create(
        model="Qwen/Qwen2.5-7B-Instruct", messages=[{"role": "user", "content": "hello"}]
    )
    assert (whole.model, whole.choices[0].message.content) == ("Qwen/Qwen2.5-7B-Instruct", "echo: hello")


def test_a_request_to_an_orders_service_name_answers_as_that_order(standin: StandIn) -> None:
    # what the controller's in-cluster prober sends through the real node's relay: its own Host, no prefix
    headers = {"Host": "chat.team-a.svc:8000", "Authorization": "Bearer s3cret"}
    r = httpx.get(f"{standin.base_url}/v1/models", headers=headers)
    assert [m["id"] for m in r.json()["data"]] == ["Qwen/Qwen2.5-7B-Instruct"]
    wrong = httpx.get(f"{standin.base_url}/v1/models", headers={**headers, "Authorization": "Bearer other"})
    assert wrong.status_code == 401
    assert standin.requests("team-a", "chat") == 2


def test_a_text_completion_answers_the_openai_clients_completions_call(standin: StandIn) -> None:
    """Issue 31: the stand-in answers `/v1/completions` as the runtimes do, not only chat."""
    client = openai.OpenAI(base_url=f"{standin.url_for('team-a', 'chat')}/v1", api_key="s3cret")
    reply = client.completions.create(model="Qwen/Qwen2.5-7B-Instruct", prompt="Hello there", max_tokens=8)
    assert (reply.object, reply.model, reply.choices[0].text) == (
        "text_completion",
        "Qwen/Qwen2.5-7B-Instruct",
        "echo: Hello there",
    )
    assert reply.usage is not None and reply.usage.prompt_tokens == 2
