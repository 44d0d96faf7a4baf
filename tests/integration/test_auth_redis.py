"""service.stores.auth against a real Redis (127.0.0.1:6379); each test owns a fresh key prefix."""

from __future__ import annotations

import asyncio
import random
import re
import time
from collections.abc import AsyncIterator
from uuid import uuid4

import pytest
import redis
from redis.asyncio import Redis
from typer.testing import CliRunner

from service.cli import app as cli_app
from service.errors import InvalidRequest, QueueUnavailable, QuotaExhausted, Unauthorized
from service.stores.auth import (
    KeyRecord,
    Reservation,
    authenticate,
    create_key,
    key_digest,
    list_keys,
    quota_key,
    reserve,
    revoke_key,
    settle,
    window_index,
)
from service.stores.connection import connect

pytestmark = pytest.mark.timeout(60)

REDIS_URL = "redis://127.0.0.1:6379/0"
WINDOW_S = 3600
# A fixed instant 100 s into a window, so no test straddles a window boundary by accident.
NOW = 500_000 * WINDOW_S + 100.0


@pytest.fixture
async def r() -> AsyncIterator[Redis]:
    client = connect(REDIS_URL)
    try:
        await client.ping()
    except redis.ConnectionError:
        pytest.fail(
            "no Redis at 127.0.0.1:6379; start one: redis-server --daemonize yes "
            "--bind 127.0.0.1 --port 6379 --save '' --appendonly no"
        )
    yield client
    await client.aclose()


@pytest.fixture
async def r2() -> AsyncIterator[Redis]:
    """A second client with its own pool, standing in for another API process."""
    client = connect(REDIS_URL)
    yield client
    await client.aclose()


@pytest.fixture
async def prefix(r: Redis) -> AsyncIterator[str]:
    value = f"test:{uuid4().hex}:"
    yield value
    keys = [k async for k in r.scan_iter(match=value + "*")]
    if keys:
        await r.delete(*keys)


async def counter(r: Redis, prefix: str, tenant: str, now: float = NOW) -> int:
    return int(await r.get(quota_key(prefix, tenant, window_index(now, WINDOW_S))) or 0)


async def limited(r: Redis, prefix: str, quota: int, tenant: str = "acme") -> KeyRecord:
    _, record = await create_key(r, prefix, tenant, "quota", quota, WINDOW_S)
    return record


# -- keys -----------------------------------------------------------------------------


async def test_create_then_authenticate(r: Redis, prefix: str) -> None:
    before = int(time.time())
    key, record = await create_key(r, prefix, "acme", "ci runner", 1000, WINDOW_S)
    assert key.startswith("vk_")
    assert record.tenant == "acme"
    assert record.key_id == key_digest(key)[:12]
    assert before <= record.created <= time.time()

    for scheme in ("Bearer", "bearer", "BEARER"):
        assert await authenticate(r, prefix, f"{scheme} {key}") == record


async def test_stored_record_layout(r: Redis, prefix: str) -> None:
    key, record = await create_key(r, prefix, "acme", "ci", None, 60)
    digest = key_digest(key)
    assert await r.hgetall(f"{prefix}apikey:{digest}") == {
        "digest": digest,
        "key_id": record.key_id,
        "tenant": "acme",
        "name": "ci",
        "quota_tokens": "",
        "window_s": "60",
        "created": str(record.created),
    }
    assert await r.smembers(f"{prefix}apikeys") == {digest}
    assert record.quota_tokens is None


@pytest.mark.parametrize(
    ("header", "message"),
    [
        (None, "missing API key"),
        ("", "missing API key"),
        ("Basic dXNlcjpwYXNz", "scheme"),
        ("Bearer", "malformed"),
    ],
)
async def test_missing_header_or_wrong_scheme(
    r: Redis, prefix: str, header: str | None, message: str
) -> None:
    await create_key(r, prefix, "acme", "ci", None, WINDOW_S)
    with pytest.raises(Unauthorized, match=message):
        await authenticate(r, prefix, header)


async def test_wrong_key_is_refused_without_echoing_it(r: Redis, prefix: str) -> None:
    key, _ = await create_key(r, prefix, "acme", "ci", None, WINDOW_S)
    wrong = key[:-1] + ("A" if key[-1] != "A" else "B")
    with pytest.raises(Unauthorized, match="invalid or revoked") as info:
        await authenticate(r, prefix, f"Bearer {wrong}")
    assert wrong not in str(info.value)
    assert key not in str(info.value)
    # The same key under another prefix (another deployment) is unknown too.
    with pytest.raises(Unauthorized):
        await authenticate(r, f"test:{uuid4().hex}:", f"Bearer {key}")


async def test_record_under_the_wrong_name_is_refused(r: Redis, prefix: str) -> None:
    """The stored digest must equal the computed one, not just the lookup key."""
    key, _ = await create_key(r, prefix, "acme", "ci", None, WINDOW_S)
    other, _ = await create_key(r, prefix, "evil", "ci", None, WINDOW_S)
    # Copy the other key's record under this key's name: the lookup hits, the check must not.
    copied = await r.hgetall(f"{prefix}apikey:{key_digest(other)}")
    await r.hset(f"{prefix}apikey:{key_digest(key)}", mapping=dict(copied.items()))
    with pytest.raises(Unauthorized):
        await authenticate(r, prefix, f"Bearer {key}")


async def test_damaged_record_is_refused(r: Redis, prefix: str) -> None:
    key, _ = await create_key(r, prefix, "acme", "ci", None, WINDOW_S)
    await r.hdel(f"{prefix}apikey:{key_digest(key)}", "tenant")
    with pytest.raises(Unauthorized, match="damaged"):
        await authenticate(r, prefix, f"Bearer {key}")
    assert await list_keys(r, prefix) == []


async def test_revoke_by_key(r: Redis, prefix: str) -> None:
    key, _ = await create_key(r, prefix, "acme", "a", None, WINDOW_S)
    kept, kept_record = await create_key(r, prefix, "acme", "b", None, WINDOW_S)
    assert await revoke_key(r, prefix, key) is True
    with pytest.raises(Unauthorized):
        await authenticate(r, prefix, f"Bearer {key}")
    assert await revoke_key(r, prefix, key) is False
    assert await authenticate(r, prefix, f"Bearer {kept}") == kept_record
    assert await list_keys(r, prefix) == [kept_record]


async def test_revoke_by_id(r: Redis, prefix: str) -> None:
    key, record = await create_key(r, prefix, "acme", "a", None, WINDOW_S)
    assert await revoke_key(r, prefix, record.key_id) is True
    with pytest.raises(Unauthorized):
        await authenticate(r, prefix, f"Bearer {key}")
    assert await revoke_key(r, prefix, record.key_id) is False
    assert await list_keys(r, prefix) == []
    assert await r.exists(f"{prefix}apikey:{key_digest(key)}") == 0


async def test_revoke_refuses_ambiguous_and_malformed_ids(r: Redis, prefix: str) -> None:
    key, record = await create_key(r, prefix, "acme", "a", None, WINDOW_S)
    digest = key_digest(key)
    # A second digest sharing the first 12 characters (48 bits: too rare to wait for).
    twin = digest[:12] + ("0" if digest[12] != "0" else "1") + digest[13:]
    await r.sadd(f"{prefix}apikeys", twin)
    with pytest.raises(InvalidRequest, match="ambiguous"):
        await revoke_key(r, prefix, record.key_id)
    assert await authenticate(r, prefix, f"Bearer {key}") == record
    # A longer id resolves it, as does the full key.
    assert await revoke_key(r, prefix, digest[:20]) is True
    with pytest.raises(Unauthorized):
        await authenticate(r, prefix, f"Bearer {key}")
    for bad in ("abc", "ZZZZZZZZZZZZ", "", "*"):
        with pytest.raises(InvalidRequest, match="key id"):
            await revoke_key(r, prefix, bad)


async def test_no_raw_key_anywhere(r: Redis, prefix: str) -> None:
    made = [
        await create_key(r, prefix, tenant, f"key {i}", quota, WINDOW_S)
        for i, (tenant, quota) in enumerate([("acme", 1000), ("acme", None), ("beta", 50)])
    ]
    # Quota counters too, so that every kind of key this module writes is inspected.
    for _, record in made:
        await reserve(r, prefix, record, 10, now=NOW)

    listed = await list_keys(r, prefix)
    assert sorted(listed, key=lambda x: x.key_id) == sorted(
        (record for _, record in made), key=lambda x: x.key_id
    )
    stored = await dump_prefix(r, prefix)
    assert len(stored) > 0
    for key, _ in made:
        secret = key.removeprefix("vk_")
        for record in listed:
            for value in [*record.model_dump().values(), repr(record)]:
                assert secret not in str(value)
        for text in stored:
            assert secret not in text


async def dump_prefix(r: Redis, prefix: str) -> list[str]:
    """Every key name and value under ``prefix``, as text."""
    found: list[str | bytes | None] = []
    async for name in r.scan_iter(match=prefix + "*"):
        found.append(name)
        kind = await r.type(name)
        if kind == "hash":
            found += [x for pair in (await r.hgetall(name)).items() for x in pair]
        elif kind == "set":
            found += list(await r.smembers(name))
        elif kind == "string":
            found.append(await r.get(name))
        else:
            pytest.fail(f"unexpected {kind!r} {name!r}: update this test")
    return [str(x) for x in found]


async def test_redis_down_is_queue_unavailable_quickly(prefix: str) -> None:
    dead = connect("redis://127.0.0.1:1/0", timeout_s=0.5)
    record = KeyRecord(
        key_id="0" * 12, tenant="acme", name="x", quota_tokens=10, window_s=WINDOW_S, created=0
    )
    start = time.monotonic()
    try:
        with pytest.raises(QueueUnavailable, match="unreachable"):
            await authenticate(dead, prefix, "Bearer vk_" + "A" * 43)
        with pytest.raises(QueueUnavailable):
            await reserve(dead, prefix, record, 1, now=NOW)
        with pytest.raises(QueueUnavailable):
            await create_key(dead, prefix, "acme", "x", None, WINDOW_S)
        with pytest.raises(QueueUnavailable):
            await list_keys(dead, prefix)
        # settle is best effort: the request already ran.
        held = Reservation("acme", quota_key(prefix, "acme", 1), 5, granted=True)
        assert await settle(dead, prefix, held, 1) is False
    finally:
        await dead.aclose()
    assert time.monotonic() - start < 5


# -- quotas ---------------------------------------------------------------------------


async def test_concurrent_reserves_never_overshoot(r: Redis, r2: Redis, prefix: str) -> None:
    quota = 10_000
    record = await limited(r, prefix, quota)
    rng = random.Random(20240601)
    estimates = [rng.randint(10, 200) for _ in range(200)]  # ~21 000 asked of 10 000

    async def one(i: int) -> Reservation | QuotaExhausted:
        try:
            return await reserve(r if i % 2 else r2, prefix, record, estimates[i], now=NOW)
        except QuotaExhausted as exc:
            return exc

    outcomes = await asyncio.gather(*(one(i) for i in range(len(estimates))))
    errors = [o for o in outcomes if isinstance(o, QuotaExhausted)]
    assert all(e.retry_after is not None and e.retry_after > 0 for e in errors)
    held = [o if isinstance(o, Reservation) else None for o in outcomes]
    granted = [(h, e) for h, e in zip(held, estimates, strict=True) if h is not None]
    refused = [e for h, e in zip(held, estimates, strict=True) if h is None]
    used = sum(e for _, e in granted)
    assert granted
    assert refused
    assert used <= quota
    assert await counter(r, prefix, "acme") == used
    # Every refusal was right: it would not have fitted even beside what was granted.
    assert used + min(refused) > quota

    actuals = [max(0, e + rng.randint(-3, 3)) for _, e in granted]
    await asyncio.gather(
        *(
            settle(r if i % 2 else r2, prefix, h, actual)
            for i, ((h, _), actual) in enumerate(zip(granted, actuals, strict=True))
        )
    )
    assert sum(actuals) <= quota + max(estimates)
    assert await counter(r, prefix, "acme") == sum(actuals)


async def test_interleaved_reserve_and_settle(r: Redis, r2: Redis, prefix: str) -> None:
    """Requests reserve, run a while, then settle; refunds let later ones in."""
    quota = 10_000
    record = await limited(r, prefix, quota)
    rng = random.Random(7)
    plan = [(rng.randint(10, 200), rng.randint(-3, 3), rng.random() / 100) for _ in range(200)]

    async def one(i: int) -> int | None:
        estimate, noise, delay = plan[i]
        client = r if i % 2 else r2
        await asyncio.sleep(delay)
        try:
            held = await reserve(client, prefix, record, estimate, now=NOW)
        except QuotaExhausted:
            return None
        await asyncio.sleep(delay)
        actual = max(0, estimate + noise)
        await settle(client, prefix, held, actual)
        return actual

    results = await asyncio.gather(*(one(i) for i in range(len(plan))))
    actuals = [a for a in results if a is not None]
    assert None in results
    assert sum(actuals) <= quota + max(e for e, _, _ in plan)
    assert await counter(r, prefix, "acme") == sum(actuals)


async def test_over_quota_raises_with_retry_after(r: Redis, prefix: str) -> None:
    record = await limited(r, prefix, 1000)
    await reserve(r, prefix, record, 900, now=NOW)
    with pytest.raises(QuotaExhausted) as info:
        await reserve(r, prefix, record, 101, now=NOW)
    error = info.value
    assert (error.status, error.type) == (429, "quota_exhausted")
    assert error.retry_after == WINDOW_S - 100
    assert "900 of 1000" in error.message
    # What still fits is granted.
    assert (await reserve(r, prefix, record, 100, now=NOW)).granted
    assert await counter(r, prefix, "acme") == 1000


async def test_request_larger_than_the_quota_has_no_retry_after(r: Redis, prefix: str) -> None:
    record = await limited(r, prefix, 1000)
    with pytest.raises(QuotaExhausted, match="smaller request") as info:
        await reserve(r, prefix, record, 1001, now=NOW)
    assert info.value.retry_after is None
    assert await counter(r, prefix, "acme") == 0


async def test_new_window_resets(r: Redis, prefix: str) -> None:
    record = await limited(r, prefix, 1000)
    await reserve(r, prefix, record, 1000, now=NOW)
    with pytest.raises(QuotaExhausted):
        await reserve(r, prefix, record, 1, now=NOW)
    next_window = NOW - 100 + WINDOW_S
    held = await reserve(r, prefix, record, 1000, now=next_window)
    assert held.key != quota_key(prefix, "acme", window_index(NOW, WINDOW_S))
    assert await counter(r, prefix, "acme", now=next_window) == 1000
    ttl = await r.ttl(held.key)
    assert WINDOW_S < ttl <= WINDOW_S + 60


async def test_refund_on_failure(r: Redis, prefix: str) -> None:
    record = await limited(r, prefix, 1000)
    held = await reserve(r, prefix, record, 600, now=NOW)
    with pytest.raises(QuotaExhausted):
        await reserve(r, prefix, record, 600, now=NOW)
    assert await settle(r, prefix, held, 0) is True
    assert await counter(r, prefix, "acme") == 0
    assert (await reserve(r, prefix, record, 1000, now=NOW)).granted


async def test_settle_charges_overruns_and_skips_expired_windows(r: Redis, prefix: str) -> None:
    record = await limited(r, prefix, 1000)
    held = await reserve(r, prefix, record, 100, now=NOW)
    await settle(r, prefix, held, 250)
    assert await counter(r, prefix, "acme") == 250
    await r.delete(held.key)  # as if the window's counter had expired
    assert await settle(r, prefix, held, 0) is False
    assert await r.exists(held.key) == 0  # not recreated without a TTL


async def test_keys_of_one_tenant_share_its_quota(r: Redis, prefix: str) -> None:
    first = await limited(r, prefix, 1000)
    second = await limited(r, prefix, 1000)
    other = await limited(r, prefix, 1000, tenant="beta")
    await reserve(r, prefix, first, 800, now=NOW)
    with pytest.raises(QuotaExhausted):
        await reserve(r, prefix, second, 300, now=NOW)
    assert (await reserve(r, prefix, other, 1000, now=NOW)).granted


async def test_no_quota_is_a_no_op(r: Redis, prefix: str) -> None:
    _, record = await create_key(r, prefix, "free", "x", None, WINDOW_S)
    held = await reserve(r, prefix, record, 10**9, now=NOW)
    assert held == Reservation("free", "", 10**9, granted=False)
    assert await settle(r, prefix, held, 5) is False
    assert [k async for k in r.scan_iter(match=f"{prefix}quota:*")] == []


async def test_the_stored_digest_is_compared_in_constant_time(
    r: Redis, prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hmac

    import service.stores.auth as auth_module

    calls: list[tuple[bytes, bytes]] = []
    compare = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return compare(a, b)

    monkeypatch.setattr(auth_module.hmac, "compare_digest", spy)
    key, record = await create_key(r, prefix, "acme", "ct", None, WINDOW_S)
    assert (await authenticate(r, prefix, f"Bearer {key}")).tenant == "acme"
    digest = key_digest(key).encode()
    # The key is hashed, and the comparison of the hashes is hmac.compare_digest.
    assert calls == [(digest, digest)]
    assert key.encode() not in calls[0]
    calls.clear()
    with pytest.raises(Unauthorized):
        await authenticate(r, prefix, f"Bearer {key}x")
    assert calls == [(b"", key_digest(key + "x").encode())]  # unknown: compared all the same


def test_cli_keys_create_takes_the_window_from_the_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`verifier keys create` without --window uses auth.default_window_s, not a literal."""
    prefix = f"test:{uuid4().hex}:"
    monkeypatch.setenv("VERIFIER_REDIS_URL", REDIS_URL)
    monkeypatch.setenv("VERIFIER_REDIS__PREFIX", prefix)
    monkeypatch.setenv("VERIFIER_AUTH__DEFAULT_WINDOW_S", "120")
    runner = CliRunner()
    try:
        for args in (["--tenant", "acme"], ["--tenant", "beta", "--window", "60"]):
            made = runner.invoke(cli_app, ["keys", "create", *args])
            assert made.exit_code == 0, made.output
        listed = runner.invoke(cli_app, ["keys", "list"])
        assert listed.exit_code == 0, listed.output
        windows = dict(re.findall(r"tenant=(\w+) .* quota=None/(\d+)s", listed.stdout))
        assert windows == {"acme": "120", "beta": "60"}
    finally:
        sync = redis.Redis.from_url(REDIS_URL)
        keys = list(sync.scan_iter(match=prefix + "*"))
        if keys:
            sync.delete(*keys)
        sync.close()
