"""A server-side apply is read as YAML: a character beyond the BMP must reach the API server as a YAML escape.

The hostile-input suite (e2e/tests/test_isvc_hostile.py) found an order whose model name held such a
character: json.dumps wrote it as a surrogate pair, the API server's YAML decoder refused the body with 400,
and the order never got a status.
"""

from __future__ import annotations

import json

import pytest
import yaml
from isvc_operator._kube import apply_body


@pytest.mark.parametrize(
    "text",
    [
        "a\U000dfee0b",
        "\U0001f600",
        "\\ud83d\\ude00",
        "x\\\U0001f600",
        "\\\\\U0001f600",
        "plain",
        "\x1f\x85é",
    ],
)
def test_the_apply_body_reads_back_as_the_manifest(text: str) -> None:
    manifest = {"metadata": {"name": "n"}, "status": {"message": text}}

    body = apply_body(manifest).decode()

    assert yaml.safe_load(body) == manifest  # json.dumps alone reads back as two lone surrogates


def test_without_such_characters_the_body_is_json() -> None:
    manifest = {"metadata": {"name": "n"}, "status": {"message": 'é \\u and " quotes'}}

    assert json.loads(apply_body(manifest)) == manifest
