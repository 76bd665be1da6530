"""Issue 29: junk bearer tokens cost the planner a review each and could push the controller's own answer out
of the cache. Allowed callers' tokens are cached apart, and new tokens are reviewed at a bounded rate."""

from __future__ import annotations

from isvc_planner._auth import CallerCheck

CONTROLLER = "system:serviceaccount:d8-isvc:controller"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_flood_of_junk_tokens_costs_a_bounded_number_of_reviews_and_keeps_the_callers_answer() -> None:
    reviews: list[str] = []

    def review(token: str) -> str | None:
        reviews.append(token)
        return CONTROLLER if token == "controller" else None

    clock = Clock()
    check = CallerCheck(review, [CONTROLLER], maxsize=8, reviews_per_second=10, burst=20, timer=clock)
    assert check.verdict("controller").status == 200

    codes = [check.verdict(f"junk-{i}").status for i in range(1000)]

    assert codes.count(401) == 19 and codes.count(429) == 981  # the burst, less the controller's review
    assert len(reviews) == 20
    assert (
        check.verdict("controller").status == 200 and len(reviews) == 20
    )  # still cached, not reviewed again
    clock.now += 1.0
    assert [check.verdict(f"late-{i}").status for i in range(11)] == [401] * 10 + [429]


def test_a_review_that_fails_is_asked_again_and_an_allowed_token_is_remembered_for_the_ttl() -> None:
    calls: list[str] = []
    clock = Clock()
    check = CallerCheck(lambda t: calls.append(t) or CONTROLLER, [CONTROLLER], ttl=60, timer=clock)  # type: ignore[func-returns-value]
    check.verdict("controller")
    check.verdict("controller")
    clock.now += 61
    check.verdict("controller")
    assert calls == ["controller", "controller"]
