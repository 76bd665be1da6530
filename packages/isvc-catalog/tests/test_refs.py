from __future__ import annotations

import pytest
from isvc_api import Reason, Refusal
from isvc_catalog import RepoRef, parse_repo_ref


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("Qwen/Qwen2.5-7B-Instruct", RepoRef("Qwen/Qwen2.5-7B-Instruct")),
        ("BAAI/bge-m3", RepoRef("BAAI/bge-m3")),
        ("meta-llama/Llama-3.1-8B-Instruct@main", RepoRef("meta-llama/Llama-3.1-8B-Instruct", "main")),
        ("org/model@refs/pr/12", RepoRef("org/model", "refs/pr/12")),
        (
            "a_b/c_d@0e9e39f249a16976918f6564b8830bc894c89659",
            RepoRef("a_b/c_d", "0e9e39f249a16976918f6564b8830bc894c89659"),
        ),
        ("o/" + "n" * 96, RepoRef("o/" + "n" * 96)),
    ],
)
def test_a_valid_repository_id_splits_into_repo_and_revision(ref: str, expected: RepoRef) -> None:
    assert expected == parse_repo_ref(ref)


@pytest.mark.parametrize(
    "ref",
    [
        "gpt2",  # no owner
        "a/b/c",
        "/name",
        "owner/",
        "owner/-name",
        "owner/name.",
        "own--er/name",
        "owner/na..me",
        "owner/name.git",
        "owner/" + "n" * 97,
        "owner/na me",
        "owner/имя",
        "owner/name@",
        "owner/name@bad..rev",
        "owner/name@-rev",
        # a trailing newline passed `$` (re.match): the Hub URL then held it and the controller's pass raised
        # InvalidURL on every retry, the order NotJudged for good (found by e2e/tests/test_isvc_hostile.py)
        "owner/name\n",
        "owner\n/name",
        "owner/name@main\n",
    ],
)
def test_a_malformed_repository_id_is_an_invalid_model_source(ref: str) -> None:
    result = parse_repo_ref(ref)
    assert isinstance(result, Refusal)
    assert result.reason == Reason.INVALID_MODEL_SOURCE
    assert repr(ref) in result.message
    assert "owner/name" in result.message
