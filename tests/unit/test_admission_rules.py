"""Admission control, pure: the token bucket and the verdicts, on an injected clock."""

from __future__ import annotations

import pytest

from jetcron.core.errors import RateLimited, Unavailable
from jetcron.core.placing.admission import check_pending, check_queue, check_rate
from jetcron.core.timing.pacing import TokenBucket
from jetcron.sdk.errors import RateLimitedError, api_error
from jetcron.wire.api import error_reply
from jetcron_services.gateway.problems import headers_for, status_of


def test_a_bucket_allows_its_burst_then_its_rate() -> None:
    bucket = TokenBucket.full(rate=2.0, now=100.0)
    assert [bucket.take(100.0), bucket.take(100.0)] == [0.0, 0.0]  # a burst of 2
    assert bucket.take(100.0) == pytest.approx(0.5)                # the third waits half a second
    assert bucket.take(100.25) == pytest.approx(0.25)              # nothing taken meanwhile
    assert bucket.take(100.5) == 0.0
    slow = TokenBucket.full(rate=0.1, now=0.0)                     # below 1/s: bursts of one
    assert (slow.take(0.0), slow.take(0.0)) == (0.0, pytest.approx(10.0))


def test_verdicts_name_the_limit_and_say_when_to_retry() -> None:
    check_rate("acme", 0.0)
    with pytest.raises(RateLimited) as rate:
        check_rate("acme", 0.4)
    assert rate.value.retry_after == 0.4 and "acme" in str(rate.value) and rate.value.retryable
    check_pending("acme", 4, 5)
    check_pending("acme", 400, None)
    with pytest.raises(RateLimited, match=r"5 runs waiting for placement \(its limit is 5\)"):
        check_pending("acme", 5, 5)
    check_queue("JC_PLACE", 89, 100)
    with pytest.raises(Unavailable, match=r"JC_PLACE queue is full \(90 of 100\)"):
        check_queue("JC_PLACE", 90, 100)


def test_rate_limited_travels_as_429_with_retry_after_and_a_typed_error() -> None:
    reply = error_reply(RateLimited("slow down", retry_after=1.2))
    assert reply.error is not None and (reply.error.code, reply.error.retry_after) == ("rate_limited", 1.2)
    error = api_error(reply.error)
    assert isinstance(error, RateLimitedError) and error.retry_after == 1.2 and error.retryable
    assert status_of("rate_limited", True) == 429
    assert headers_for(429, True, 1.2) == {"Retry-After": "2"}
