"""isvc model cache: each file of each pinned revision from the Hugging Face Hub kept once, checked against the
hash the Hub published, and served to every download step of the cluster that presents a token the Hub accepts
for it."""

from isvc_model_cache._app import ModelCache, create_app, file_target
from isvc_model_cache._cli import main, parser
from isvc_model_cache._errors import FillFailed, ModelCacheError, NoRoom
from isvc_model_cache._fill import Fill, hasher
from isvc_model_cache._hub import FileMeta, Hub, HubAnswer
from isvc_model_cache._metrics import CacheMetrics, Served
from isvc_model_cache._store import DIGEST, Store, Usage

__all__ = [
    "DIGEST",
    "CacheMetrics",
    "FileMeta",
    "Fill",
    "FillFailed",
    "Hub",
    "HubAnswer",
    "ModelCache",
    "ModelCacheError",
    "NoRoom",
    "Served",
    "Store",
    "Usage",
    "create_app",
    "file_target",
    "hasher",
    "main",
    "parser",
]
