"""Hugging Face repository references: `owner/name[@revision]`, checked by the Hub's own rules."""

from __future__ import annotations

import re
from dataclasses import dataclass

from isvc_api import Reason, Refusal

__all__ = ["RepoRef", "parse_repo_ref"]

# huggingface_hub validators: letters, digits, - _ . ; a word character at both ends; at most 96
# characters per part; no "--" or ".." anywhere; a name may not end in ".git".
_PART = re.compile(r"^[A-Za-z0-9_](?:[A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?$")
# A git ref name or a commit: no spaces, no "..", no control characters, no leading "/" or "-".
_REVISION = re.compile(r"^(?!/)(?!-)(?!.*\.\.)(?!.*//)[A-Za-z0-9_.\-/]{1,255}(?<!/)(?<!\.lock)$")


@dataclass(frozen=True, slots=True)
class RepoRef:
    """A repository id and the revision asked for (None: the default branch)."""

    repo: str
    revision: str | None = None

    def __str__(self) -> str:
        return self.repo if self.revision is None else f"{self.repo}@{self.revision}"


def _invalid(ref: str, why: str) -> Refusal:
    return Refusal(
        reason=Reason.INVALID_MODEL_SOURCE,
        message=(
            f"spec.model.ref.name {ref!r} is not a Hugging Face repository id: {why}. "
            "Write it as owner/name, optionally followed by @revision, e.g. Qwen/Qwen2.5-7B-Instruct."
        ),
    )


def parse_repo_ref(ref: str) -> RepoRef | Refusal:
    """Split and check `owner/name[@revision]`; an InvalidModelSource refusal names what is wrong."""
    repo, at, revision = ref.partition("@")
    if at and not revision:
        return _invalid(ref, "the revision after @ is empty")
    parts = repo.split("/")
    if len(parts) != 2:
        return _invalid(ref, "it needs exactly one / between owner and name")
    for part in parts:
        if not part:
            return _invalid(ref, "owner and name must not be empty")
        if len(part) > 96:
            return _invalid(ref, f"{part[:20]}… is longer than 96 characters")
        if not _PART.fullmatch(part):
            return _invalid(
                ref,
                f"{part!r} may hold only letters, digits, '-', '_' and '.', "
                "and must start and end with a letter, digit or '_'",
            )
        if "--" in part or ".." in part:
            return _invalid(ref, f"{part!r} contains '--' or '..'")
    if parts[1].endswith(".git"):
        return _invalid(ref, "the name must not end in .git")
    if at and not _REVISION.fullmatch(revision):
        return _invalid(ref, f"revision {revision!r} is not a branch, tag or commit name")
    return RepoRef(repo=repo, revision=revision or None)
