"""The model cache's errors.

    ModelCacheError
     ├── NoRoom        the store cannot take a file: larger than its bound, or the room is held by downloads
     └── FillFailed    a file did not arrive whole from the Hub, or did not match the hash the Hub published

Neither reaches a download step as anything but an HTTP answer (507, or a connection cut before the file's
last byte); the step then downloads from the Hub itself.
"""

from __future__ import annotations

__all__ = ["FillFailed", "ModelCacheError", "NoRoom"]


class ModelCacheError(Exception):
    """Base class of the model cache's errors."""


class NoRoom(ModelCacheError):
    """The store cannot take the file now (permanent for this request: the step goes to the Hub)."""


class FillFailed(ModelCacheError):
    """A fill ended without a verified file; the downloads reading it are cut off."""
