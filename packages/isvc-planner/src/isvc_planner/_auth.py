"""Who may call the planner's API: the bearer token of one allowed caller, vouched for by the API server.

Issue 14: the API was open to anyone who could reach the pod; an anonymous `POST /v1/plan` under invented
order names reserved every GPU and `POST /v1/release` dropped anyone's hold. Every `/v1/*` call now carries
`Authorization: Bearer <token>`; the API server says whose token it is (TokenReview, in `_kube.py`), and
only the names given with `--allowed-caller` (the controller's ServiceAccount) may plan, release or judge.
Answers are cached for a short while, keyed by a digest of the token (the token itself is not kept).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from cachetools import TTLCache

__all__ = ["CallerCheck", "CallerVerdict", "ReviewFailed", "TokenReviewer", "service_account_name"]

#: The user name a token belongs to, or None when the API server does not authenticate it. Raises
#: ReviewFailed when the API server cannot be asked (the caller then retries: 503, not 401).
TokenReviewer = Callable[[str], str | None]

_SA_PREFIX = "system:serviceaccount:"


class ReviewFailed(Exception):
    """The API server could not review a token (unreachable, or the planner may not ask)."""


def service_account_name(text: str) -> str:
    """`system:serviceaccount:NS:NAME`, checked; ValueError otherwise."""
    parts = text.split(":")
    if not text.startswith(_SA_PREFIX) or len(parts) != 4 or not parts[2] or not parts[3]:
        raise ValueError(f"{text!r} is not system:serviceaccount:<namespace>:<name>")
    return text


@dataclass(frozen=True)
class CallerVerdict:
    """What to answer a request: 200 goes on; 401 no or unknown token; 403 someone else; 503 ask later."""

    status: int
    detail: str
    username: str | None = None


class CallerCheck:
    """Authenticates a bearer token by review and authorizes its user against the allowed callers."""

    def __init__(
        self,
        review: TokenReviewer,
        allowed: Collection[str],
        *,
        ttl: float = 60.0,
        maxsize: int = 1024,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self._review = review
        self.allowed = frozenset(allowed)
        self._cache: TTLCache[str, str | None] = TTLCache(maxsize=maxsize, ttl=ttl, timer=timer)
        self._lock = threading.Lock()

    def username(self, token: str) -> str | None:
        """Whose token this is (cached, unknown tokens too); ReviewFailed when it cannot be told."""
        key = hashlib.sha256(token.encode()).hexdigest()
        with self._lock:
            if key in self._cache:
                return self._cache[key]
        user = self._review(token)
        with self._lock:
            self._cache[key] = user
        return user

    def known(self, token: str | None) -> CallerVerdict | None:
        """The answer when it needs no review (no token, or one reviewed lately), without blocking; None
        when the API server must be asked (`verdict` asks)."""
        if not token:
            return CallerVerdict(401, "a bearer token is required")
        key = hashlib.sha256(token.encode()).hexdigest()
        with self._lock:
            if key not in self._cache:
                return None
            return self._for(self._cache[key])

    def verdict(self, token: str | None) -> CallerVerdict:
        """The answer for a request that carried `token` as its bearer token (None: it carried none)."""
        if not token:
            return CallerVerdict(401, "a bearer token is required")
        try:
            user = self.username(token)
        except ReviewFailed as error:
            return CallerVerdict(503, f"the token could not be reviewed: {error}")
        return self._for(user)

    def _for(self, user: str | None) -> CallerVerdict:
        if user is None:
            return CallerVerdict(401, "the token is not valid")
        if user not in self.allowed:
            return CallerVerdict(403, f"{user} may not call the planner", user)
        return CallerVerdict(200, "ok", user)
