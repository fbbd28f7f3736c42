"""What a caller learns from an error reply: the code, the message, and whether sending it again can help."""

from __future__ import annotations

import pytest

from jetcron.core.errors import Conflict, Contended, IdempotencyStoreFull, InvalidSpec, NotFound
from jetcron.wire.api import error_reply


@pytest.mark.parametrize(("exc", "code", "retryable"), [
    pytest.param(Contended("idempotency key 'k' is being used by a concurrent request; retry"), "conflict", True,
                 id="concurrent_request_is_retryable"),
    pytest.param(Conflict("job 'j' already exists (use update)"), "conflict", False, id="name_taken_is_final"),
    pytest.param(NotFound("job", "j"), "not_found", False, id="not_found_is_final"),
    pytest.param(IdempotencyStoreFull("idempotency bucket full"), "idempotency_full", True, id="store_full"),
    pytest.param(RuntimeError("boom"), "internal", True, id="a_bug_is_worth_one_more_try"),
])
def test_error_reply_says_whether_to_retry(exc: Exception, code: str, retryable: bool) -> None:
    error = error_reply(exc).error
    assert error is not None
    assert (error.code, error.retryable) == (code, retryable)
    assert str(exc) in error.message


def test_invalid_spec_names_field_and_value() -> None:
    error = error_reply(InvalidSpec("schedule.cron", "61 * * * *", "minute out of range")).error
    assert error is not None
    assert (error.code, error.field, error.value, error.retryable) == ("invalid", "schedule.cron", "61 * * * *", False)
    assert error.message == "schedule.cron: minute out of range (got '61 * * * *')"
