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


def test_the_callers_token_is_reviewed_again_outside_the_bucket_once_its_review_expired_issue_44() -> None:
    """Before: after the controller's review expired (60 s), its token waited in the bucket behind the junk, and
    a flood of 1,000 new tokens a second answered it 429 for as long as the flood went on."""
    reviews: list[str] = []

    def review(token: str) -> str | None:
        reviews.append(token)
        return CONTROLLER if token == "controller" else None

    clock = Clock()
    check = CallerCheck(review, [CONTROLLER], ttl=60, reviews_per_second=10, burst=20, timer=clock)
    assert check.verdict("controller").status == 200
    answers = []
    for second in range(120):  # two minutes of 1,000 junk tokens a second
        clock.now += 1.0
        junk = [check.verdict(f"junk-{second}-{i}").status for i in range(1000)]
        assert junk.count(401) <= 20  # the bucket: its burst, then 10 a second
        answers.append(check.verdict("controller").status)

    assert answers == [200] * 120
    assert reviews.count("controller") == 3  # at 0, then each time its review of a minute expired


def test_a_vouched_token_the_api_server_no_longer_authenticates_is_forgotten_issue_44() -> None:
    valid = {"controller"}
    clock = Clock()
    check = CallerCheck(
        lambda t: CONTROLLER if t in valid else None, [CONTROLLER], ttl=60, burst=1, timer=clock
    )
    assert check.verdict("controller").status == 200
    valid.clear()  # its pod is gone: the token no longer authenticates
    clock.now += 61

    assert check.verdict("controller").status == 401
    clock.now += 61
    assert check.verdict("controller").status == 401  # from the bucket again (refilled): not vouched any more
