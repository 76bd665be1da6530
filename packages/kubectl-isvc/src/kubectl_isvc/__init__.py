"""kubectl isvc: why an order is not serving, what a model would get, and where the GPU has gone."""

from kubectl_isvc._capacity import Capacity, Waiting, capacity, compute
from kubectl_isvc._cli import locale_lang, main, run
from kubectl_isvc._common import Exit, Out, Unread
from kubectl_isvc._errors import Forbidden, KubectlIsvcError, NotFound, ReadFailed, Unreachable
from kubectl_isvc._estimate import PREFIX, Estimate, estimate, order_body, read_warnings
from kubectl_isvc._faq import Advice, Faq, FaqEntry, Lang, StatusEntry, Who, load_faq
from kubectl_isvc._plan import KEY_FLAGS, PlanSummary, key_flags, summarize_plan
from kubectl_isvc._read import Obj, Reader, parse_warnings
from kubectl_isvc._why import Diagnosis, Verdict, diagnose, why

__all__ = [
    "KEY_FLAGS",
    "PREFIX",
    "Advice",
    "Capacity",
    "Diagnosis",
    "Estimate",
    "Exit",
    "Faq",
    "FaqEntry",
    "Forbidden",
    "KubectlIsvcError",
    "Lang",
    "NotFound",
    "Obj",
    "Out",
    "PlanSummary",
    "ReadFailed",
    "Reader",
    "StatusEntry",
    "Unreachable",
    "Unread",
    "Verdict",
    "Waiting",
    "Who",
    "capacity",
    "compute",
    "diagnose",
    "estimate",
    "key_flags",
    "load_faq",
    "locale_lang",
    "main",
    "order_body",
    "parse_warnings",
    "read_warnings",
    "run",
    "summarize_plan",
    "why",
]
