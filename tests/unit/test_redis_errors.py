"""Which failures of a Redis call become 503 queue_unavailable, and which stay bugs."""

from __future__ import annotations

import pytest
from redis import exceptions as rex

from service.errors import QueueUnavailable
from service.stores.connection import is_unreachable, unavailable

# What uvloop raises when redis-py writes to a connection Redis closed while dying.
UVLOOP_CLOSED = RuntimeError(
    "unable to perform operation on <TCPTransport closed=True reading=False 0x55>; "
    "the handler is closed"
)


@pytest.mark.parametrize(
    "exc",
    [rex.ConnectionError("refused"), rex.TimeoutError("timed out"), UVLOOP_CLOSED],
)
def test_connectivity_failures_become_queue_unavailable(exc: Exception) -> None:
    assert is_unreachable(exc)
    with pytest.raises(QueueUnavailable, match="VERIFIER_REDIS_URL"), unavailable("submit"):
        raise exc


@pytest.mark.parametrize(
    "exc", [RuntimeError("some bug"), rex.ResponseError("WRONGTYPE"), ValueError("x")]
)
def test_other_errors_pass_through(exc: Exception) -> None:
    assert not is_unreachable(exc)
    with pytest.raises(type(exc)), unavailable("submit"):
        raise exc
