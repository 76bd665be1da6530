"""Who may call the planner's API: the bearer token of one allowed caller, vouched for by the API server.

Issue 14: the API was open to anyone who could reach the pod; an anonymous `POST /v1/plan` under invented
order names reserved every GPU and `POST /v1/release` dropped anyone's hold. Every `/v1/*` call now carries
`Authorization: Bearer <token>`; the API server says whose token it is (TokenReview, in `_kube.py`), and
only the names given with `--allowed-caller` (the controller's ServiceAccount) may plan, release or judge.
Answers are cached for a short while, keyed by a digest of the token (the token itself is not kept).

Issue 29: every junk token cost a TokenReview, and a flood of them could push the controller's own answer
out of the one cache. Tokens of an allowed caller now have a cache of their own that no other token enters,
and the reviews of tokens not seen before are rate limited (a token bucket): past it the request is answered
429 without asking the API server.

Issue 44: once the controller's review expired (a minute), its own token was a new one again and waited in
that bucket behind the junk: an order read PlannerRequestFailed (429) for 40 s of a flood. A token once
vouched for as an allowed caller is now remembered as such for as long as a projected token lives, and its
review, when due again, is asked at once, never from the bucket: only tokens the planner has not reviewed
before spend it. A vouched token the API server no longer authenticates is forgotten.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from cachetools import TTLCache

__all__ = [
    "CallerCheck",
    "CallerVerdict",
    "ReviewFailed",
    "TokenReviewer",
    "TooManyReviews",
    "service_account_name",
]

#: The user name a token belongs to, or None when the API server does not authenticate it. Raises
#: ReviewFailed when the API server cannot be asked (the caller then retries: 503, not 401).
TokenReviewer = Callable[[str], str | None]

_SA_PREFIX = "system:serviceaccount:"
# How long a token vouched for as an allowed caller is re-reviewed outside the bucket: the longest a projected
# ServiceAccount token lives by default (the kubelet asks one hour; the API server may extend it to a year
# with --service-account-extend-token-expiration, which a review then still answers: it stays remembered
# while it is used, as each review renews it).
VOUCHED_FOR = 2 * 3600.0


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
    """What to answer a request: 200 goes on; 401 no or unknown token; 403 someone else; 429 too many new
    tokens at once; 503 ask later."""

    status: int
    detail: str
    username: str | None = None


class TooManyReviews(Exception):
    """The reviews of new tokens are spent for now: the request is refused without one."""


class CallerCheck:
    """Authenticates a bearer token by review and authorizes its user against the allowed callers."""

    def __init__(
        self,
        review: TokenReviewer,
        allowed: Collection[str],
        *,
        ttl: float = 60.0,
        maxsize: int = 1024,
        reviews_per_second: float = 10.0,
        burst: int = 20,
        vouched_for: float = VOUCHED_FOR,
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self._review = review
        self.allowed = frozenset(allowed)
        # the allowed callers' tokens (a few, rotated hourly) apart: no other token can push one out
        self._callers: TTLCache[str, str] = TTLCache(maxsize=64, ttl=ttl, timer=timer)
        self._others: TTLCache[str, str | None] = TTLCache(maxsize=maxsize, ttl=ttl, timer=timer)
        # tokens once vouched for as an allowed caller: reviewed again outside the bucket when due
        self._vouched: TTLCache[str, str] = TTLCache(maxsize=64, ttl=vouched_for, timer=timer)
        self._rate, self._burst, self._timer = reviews_per_second, float(burst), timer
        self._tokens, self._at = float(burst), timer()
        self._lock = threading.Lock()

    def _spend(self) -> bool:
        """Take one review from the bucket (called holding the lock)."""
        now = self._timer()
        self._tokens = min(self._burst, self._tokens + (now - self._at) * self._rate)
        self._at = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True

    def username(self, token: str) -> str | None:
        """Whose token this is (cached, unknown tokens too); ReviewFailed when it cannot be told,
        TooManyReviews when new tokens came faster than they may be reviewed."""
        key = hashlib.sha256(token.encode()).hexdigest()
        with self._lock:
            if key in self._callers:
                return self._callers[key]
            if key in self._others:
                return self._others[key]
            if key not in self._vouched and not self._spend():
                raise TooManyReviews
        user = self._review(token)
        with self._lock:
            if user is not None and user in self.allowed:
                self._callers[key] = self._vouched[key] = user
            else:
                self._vouched.pop(key, None)
                self._others[key] = user
        return user

    def known(self, token: str | None) -> CallerVerdict | None:
        """The answer when it needs no review (no token, or one reviewed lately), without blocking; None
        when the API server must be asked (`verdict` asks)."""
        if not token:
            return CallerVerdict(401, "a bearer token is required")
        key = hashlib.sha256(token.encode()).hexdigest()
        with self._lock:
            for cache in (self._callers, self._others):
                if key in cache:
                    return self._for(cache[key])
        return None

    def verdict(self, token: str | None) -> CallerVerdict:
        """The answer for a request that carried `token` as its bearer token (None: it carried none)."""
        if not token:
            return CallerVerdict(401, "a bearer token is required")
        try:
            user = self.username(token)
        except TooManyReviews:
            return CallerVerdict(429, "too many tokens to review; ask again shortly")
        except ReviewFailed as error:
            return CallerVerdict(503, f"the token could not be reviewed: {error}")
        return self._for(user)

    def _for(self, user: str | None) -> CallerVerdict:
        if user is None:
            return CallerVerdict(401, "the token is not valid")
        if user not in self.allowed:
            return CallerVerdict(403, f"{user} may not call the planner", user)
        return CallerVerdict(200, "ok", user)
