"""isvc health: probe an order's inference API and tell a blip from a sustained failure."""

from isvc_health._answers import RuntimeErrors
from isvc_health._errors import HealthError, TemplateInvalid
from isvc_health._meter import METER_HEADER, Meter, parse_meter
from isvc_health._meter import serve as serve_meter
from isvc_health._metrics import ProbeMetrics
from isvc_health._probe import ProbeOutcome, Prober, ProbeResult, judge_response
from isvc_health._resolve import EndpointResolver, ServiceDNSResolver, TemplateResolver
from isvc_health._schedule import ProbeSchedule, ProbeTarget
from isvc_health._tracker import HealthSettings, judge_health, record_from_ready

__all__ = [
    "METER_HEADER",
    "EndpointResolver",
    "HealthError",
    "HealthSettings",
    "Meter",
    "ProbeMetrics",
    "ProbeOutcome",
    "ProbeResult",
    "ProbeSchedule",
    "ProbeTarget",
    "Prober",
    "RuntimeErrors",
    "ServiceDNSResolver",
    "TemplateInvalid",
    "TemplateResolver",
    "judge_health",
    "judge_response",
    "parse_meter",
    "record_from_ready",
    "serve_meter",
]
