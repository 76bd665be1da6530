"""`kubectl isvc estimate MODEL [--class C]`: what an order would get, asked of the API server.

A server-side dry run creates the order as the caller (`dryRun=All`: nothing is stored, the caller's
own `create` permission is checked); the module's estimate webhook, called for dry runs only, answers
with warnings of the form `isvc-estimate: key=value` (the contract is in the package README). Other
warnings are passed on as they came.
"""

from __future__ import annotations

from typing import Any

from isvc_api import GROUP, VERSION, CatalogKind, ModelSource
from pydantic import Field

from kubectl_isvc._common import Exit, Out, Unread, unread
from kubectl_isvc._errors import Forbidden, ReadFailed, Unreachable
from kubectl_isvc._faq import Faq, Lang
from kubectl_isvc._plan import PlanSummary, summarize_plan
from kubectl_isvc._read import Obj, Reader, orders_path
from kubectl_isvc._why import FaqAdvice, advice_for

__all__ = ["PREFIX", "Estimate", "estimate", "order_body", "read_warnings"]

PREFIX = "isvc-estimate: "
CONTRACT_VERSION = "1"
GENERATE_NAME = "isvc-estimate-"
# Keys whose repeated warnings are joined into one text, and the one whose repeats make a list.
_TEXTS = ("message", "explanation")
_LIST = "arg"
# Keys that are LaunchPlan fields: spec.placement.<key>, spec.estimates.<key>, spec.runtime.<key>.
_PLACEMENT = (
    "deviceClassName",
    "driver",
    "pool",
    "nodeName",
    "acceleratorProductName",
    "acceleratorMemoryGiB",
    "acceleratorComputeCapability",
    "placementMode",
    "sharingMode",
    "sharePercent",
    "deviceCount",
    "memoryGiB",
)
_ESTIMATES = (
    "requiredMemoryGiB",
    "weightsGiB",
    "kvCacheGiB",
    "overheadGiB",
    "contextLength",
    "kvBytesPerToken",
    "kvCacheTokens",
    "concurrentRequests",
    "requestTokens",
    "cpu",
    "memory",
    "modelVolume",
    "explanation",
)
_RUNTIME = {"runtime": "recipe", "image": "image", "servedName": "servedName"}
_NUMBERS = (
    "acceleratorMemoryGiB",
    "memoryGiB",
    "requiredMemoryGiB",
    "weightsGiB",
    "kvCacheGiB",
    "overheadGiB",
)
_INTEGERS = (
    "sharePercent",
    "deviceCount",
    "contextLength",
    "kvBytesPerToken",
    "parameterCount",
    "kvCacheTokens",
    "concurrentRequests",
    "requestTokens",
)
NO_WEBHOOK = (
    "The API server accepted the dry run, and no estimate came with it: the module's estimate webhook "
    "is not installed, or did not answer in time (it fails open and never blocks an order)."
)


class Estimate(Out):
    """The answer to `estimate`: a plan, or the reason the order would be refused."""

    namespace: str
    model: str
    class_name: str | None
    lang: Lang
    verdict: str  # Planned | Refused | Unknown
    exit_code: int
    condition: str | None = None
    reason: str | None = None
    message: str | None = None
    endpoint_type: str | None = None
    facts: dict[str, str] = Field(default_factory=dict)
    plan: PlanSummary | None = None
    faq: FaqAdvice | None = None
    warnings: list[str] = Field(default_factory=list)  # warnings that were not the estimate's
    notes: list[str] = Field(default_factory=list)
    unread: list[Unread] = Field(default_factory=list)


def order_body(
    namespace: str,
    model: str,
    class_name: str | None,
    kind: CatalogKind | None = None,
    secret: str | None = None,
) -> Obj:
    """The order the dry run creates: a Hugging Face repository, or a catalog object when `kind` is given;
    a generated name, so an existing order of any name is never in the way."""
    ref: dict[str, Any] = {"name": model}
    spec_model: dict[str, Any] = {"src": ModelSource.HUGGING_FACE.value, "ref": ref}
    if kind is not None:
        spec_model["src"] = ModelSource.AI_MODELS.value
        ref["kind"] = kind.value
    if secret:
        spec_model["authSecretRef"] = {"name": secret}
    spec: dict[str, Any] = {"model": spec_model}
    if class_name:
        spec["inferenceServiceClassName"] = class_name
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "InferenceService",
        "metadata": {"generateName": GENERATE_NAME, "namespace": namespace},
        "spec": spec,
    }


def read_warnings(warnings: list[str]) -> tuple[dict[str, str], list[str], list[str]]:
    """(single keys, arg list, other warnings): the estimate's `key=value` warnings parsed, texts joined."""
    keys: dict[str, str] = {}
    args: list[str] = []
    others: list[str] = []
    for warning in warnings:
        if not warning.startswith(PREFIX):
            others.append(warning)
            continue
        key, eq, value = warning[len(PREFIX) :].partition("=")
        key = key.strip()
        if not eq or not key:
            others.append(warning)
        elif key == _LIST:
            args.append(value)
        elif key in _TEXTS and key in keys:
            keys[key] += value
        else:
            keys[key] = value
    return keys, args, others


def _typed(key: str, value: str) -> Any:
    try:
        if key in _NUMBERS:
            return float(value)
        if key in _INTEGERS:
            return int(value)
    except ValueError:
        return value
    return value


def _plan(keys: dict[str, str], args: list[str]) -> PlanSummary | None:
    placement = {k: _typed(k, keys[k]) for k in _PLACEMENT if k in keys}
    estimates = {k: _typed(k, keys[k]) for k in _ESTIMATES if k in keys}
    runtime: dict[str, Any] = {field: keys[k] for k, field in _RUNTIME.items() if k in keys}
    if args:
        runtime["args"] = args
    if not (placement or estimates or runtime):
        return None
    return summarize_plan({"spec": {"placement": placement, "estimates": estimates, "runtime": runtime}})


_HINT = (
    "a dry run needs the same permission as creating the order: create on inferenceservices in the "
    "namespace (the module's d8:user-authz:isvc:editor role grants it)"
)


_KNOWN = frozenset(
    {
        "version",
        "verdict",
        "condition",
        "reason",
        "message",
        "endpointType",
        "class",
        *_PLACEMENT,
        *_ESTIMATES,
        *_RUNTIME,
    }
)


def _not_admitted(e: ReadFailed, base: dict[str, Any]) -> Estimate:
    """The API server did not take the dry run: the caller may not, it did not answer, or the schema refuses
    the order itself (400/422)."""
    if isinstance(e, Forbidden | Unreachable) or e.status not in (400, 422):
        return Estimate(**base, verdict="Unknown", exit_code=Exit.UNKNOWN, unread=[unread(e, _HINT)])
    return Estimate(
        **base,
        verdict="Refused",
        exit_code=Exit.REFUSED,
        condition="APIServer",
        reason="Invalid",
        message=e.why,
        notes=[
            "The API server refuses the order itself: the schema of an order does not admit "
            "it (see the FAQ, Which layer answers what)."
        ],
    )


def _answer(warnings: list[str], base: dict[str, Any], faq: Faq, lang: Lang) -> Estimate:
    """The estimate the webhook's warnings carry (none: no webhook answered)."""
    keys, args, others = read_warnings(warnings)
    if not keys:
        return Estimate(
            **base, verdict="Unknown", exit_code=Exit.UNKNOWN, warnings=others, notes=[NO_WEBHOOK]
        )
    notes = []
    if keys.get("version", CONTRACT_VERSION) != CONTRACT_VERSION:
        notes.append(
            f"The webhook speaks estimate contract version {keys['version']}; this plugin reads "
            f"version {CONTRACT_VERSION}. Fields it does not know are kept under facts."
        )
    verdict = keys.get("verdict", "Unknown")
    refused = verdict == "Refused"
    code = Exit.REFUSED if refused else Exit.SERVING if verdict == "Planned" else Exit.UNKNOWN
    reason = keys.get("reason")
    return Estimate(
        **{**base, "class_name": keys.get("class", base["class_name"]) or base["class_name"]},
        verdict=verdict,
        exit_code=code,
        condition=keys.get("condition"),
        reason=reason,
        message=keys.get("message"),
        endpoint_type=keys.get("endpointType"),
        facts={k: v for k, v in keys.items() if k not in _KNOWN},
        plan=_plan(keys, args),
        faq=advice_for(faq, reason, lang) if refused and reason else None,
        warnings=others,
        notes=notes,
    )


def estimate(
    reader: Reader,
    namespace: str,
    model: str,
    class_name: str | None,
    faq: Faq,
    lang: Lang,
    kind: CatalogKind | None = None,
    secret: str | None = None,
) -> Estimate:
    """Dry-run create the order as the caller and read the estimate webhook's warnings."""
    base: dict[str, Any] = {"namespace": namespace, "model": model, "class_name": class_name, "lang": lang}
    body = order_body(namespace, model, class_name, kind, secret)
    try:
        _, warnings = reader.create(
            orders_path(namespace),
            f"a dry run of an order for {model} in {namespace}",
            body,
            {"dryRun": "All", "fieldValidation": "Strict"},
        )
    except ReadFailed as e:
        return _not_admitted(e, base)
    return _answer(warnings, base, faq, lang)
