"""isvc workload: the manifests of an order's children, and judges of what the cluster made of them."""

from isvc_workload._autoscaler import CPU_TARGET_PERCENT, SCALE_DOWN_WINDOW_SECONDS, autoscaler
from isvc_workload._claim_template import (
    CLAIM_NAME,
    claim_template_name,
    resource_claim_template,
    uuid_selector,
)
from isvc_workload._common import WorkloadInputs, child_labels, child_metadata, owner_reference
from isvc_workload._disruption import disruption_budget
from isvc_workload._endpoint import API_PATH, ISSUER_ANNOTATION, endpoint_url, external_host, ingress
from isvc_workload._errors import IsvcWorkloadError, PlanNotExpressible, SettingsIncomplete
from isvc_workload._growth import (
    EVENT_GROWTH_CLAIM_UNPLACED,
    EVENT_SETTLED_REGION_TOO_SMALL,
    GrowthJudgement,
    UnplacedReplica,
    judge_growth,
    settled_region_check,
)
from isvc_workload._judge import (
    IMAGE_NEVER_STARTED,
    MAX_LOG_LINES,
    STARTUP_FAILED_WAITING,
    LogReader,
    WorkloadJudgement,
    cel_undecidable,
    claims_exhausted,
    judge_workload,
    workload_error,
)
from isvc_workload._kube import awaits_claim
from isvc_workload._ports import SERVICE_PORT
from isvc_workload._quota import QUOTA_RETRY_ANNOTATION, QuotaRefusal, quota_refusal
from isvc_workload._rollout import recreates_pods, set_rolling
from isvc_workload._secret import AUTH_SECRET_KEY, auth_secret, auth_secret_name, read_token
from isvc_workload._service import HTTPS_SERVICE_PORT, METRICS_SERVICE_PORT, service
from isvc_workload._settings import WorkloadSettings
from isvc_workload._statefulset import (
    CONTAINER_NAME,
    FETCH_CONTAINER_NAME,
    HF_TOKEN_ENV,
    MODEL_MOUNT_PATH,
    RUNTIME_HASH_ANNOTATION,
    TOKEN_HASH_ANNOTATION,
    ModelVolume,
    model_volume,
    settle,
    statefulset,
)
from isvc_workload._tls import cluster_issuer, tls_secret_name

__all__ = [
    "API_PATH",
    "AUTH_SECRET_KEY",
    "CLAIM_NAME",
    "CONTAINER_NAME",
    "CPU_TARGET_PERCENT",
    "EVENT_GROWTH_CLAIM_UNPLACED",
    "EVENT_SETTLED_REGION_TOO_SMALL",
    "FETCH_CONTAINER_NAME",
    "HF_TOKEN_ENV",
    "HTTPS_SERVICE_PORT",
    "IMAGE_NEVER_STARTED",
    "ISSUER_ANNOTATION",
    "MAX_LOG_LINES",
    "METRICS_SERVICE_PORT",
    "MODEL_MOUNT_PATH",
    "QUOTA_RETRY_ANNOTATION",
    "RUNTIME_HASH_ANNOTATION",
    "SCALE_DOWN_WINDOW_SECONDS",
    "SERVICE_PORT",
    "STARTUP_FAILED_WAITING",
    "TOKEN_HASH_ANNOTATION",
    "GrowthJudgement",
    "IsvcWorkloadError",
    "LogReader",
    "ModelVolume",
    "PlanNotExpressible",
    "QuotaRefusal",
    "SettingsIncomplete",
    "UnplacedReplica",
    "WorkloadInputs",
    "WorkloadJudgement",
    "WorkloadSettings",
    "auth_secret",
    "auth_secret_name",
    "autoscaler",
    "awaits_claim",
    "cel_undecidable",
    "child_labels",
    "child_metadata",
    "claim_template_name",
    "claims_exhausted",
    "cluster_issuer",
    "disruption_budget",
    "endpoint_url",
    "external_host",
    "ingress",
    "judge_growth",
    "judge_workload",
    "model_volume",
    "owner_reference",
    "quota_refusal",
    "read_token",
    "recreates_pods",
    "resource_claim_template",
    "service",
    "set_rolling",
    "settle",
    "settled_region_check",
    "statefulset",
    "tls_secret_name",
    "uuid_selector",
    "workload_error",
]
