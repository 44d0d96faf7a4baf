"""API keys, tenants and per-tenant token quotas, stored in Redis.

Keys (named in ``service.stores.keys``, with the prefix ``redis.prefix``, e.g. ``verifier:``)::

    verifier:apikey:<sha256 hex>           hash: digest, key_id, tenant, name, quota_tokens
                                           ("" = unlimited), window_s, created (unix s)
    verifier:apikeys                       set of the digests, for listing and revoking
    verifier:quota:<tenant>:<window index> tokens used in that fixed window; EX window_s + 60

Only the SHA-256 digest of a key is stored; the key itself is shown once, by ``create_key``.
An unsalted fast hash is enough here: keys carry 256 random bits, so there is nothing to
brute-force, and a slow hash would cost every request.

Quotas are per tenant, in fixed windows of ``window_s`` seconds (window index =
``floor(now / window_s)``). A request ``reserve``s its estimated tokens in one Lua call
(check and add are atomic, so concurrent API processes never grant past the quota) and
``settle``s with the actual count afterwards (``actual=0`` refunds a failed request). The
total can therefore exceed the quota only by the estimate errors of requests in flight.
Keys of one tenant share its counter; give them the same quota and window.

Errors (all in ``service.errors``): ``Unauthorized`` (401), ``QuotaExhausted`` (429 +
Retry-After), Redis unreachable -> ``QueueUnavailable`` (503), bad arguments to the admin
functions -> ``InvalidRequest``.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import re
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from redis.asyncio import Redis
from redis.typing import EncodableT, FieldT

from service.config import AuthSettings
from service.errors import InvalidRequest, QuotaExhausted, Unauthorized
from service.stores.connection import connect, is_unreachable, unavailable
from service.stores.keys import RedisNames
from service.stores.tenants import check_tenant

__all__ = [
    "KEY_PREFIX",
    "AuthSettings",
    "KeyRecord",
    "Reservation",
    "StoredKey",
    "authenticate",
    "check_tenant",
    "connect",
    "create_key",
    "key_digest",
    "key_id_of",
    "list_keys",
    "new_api_key",
    "parse_bearer",
    "quota_key",
    "reserve",
    "revoke_key",
    "seconds_to_next_window",
    "settle",
    "window_index",
]

logger = logging.getLogger(__name__)

KEY_PREFIX = "vk_"
KEY_ENTROPY_BYTES = 32
KEY_ID_CHARS = 12
# Shorter ids would make an accidental mass match (and an ambiguous revoke) likely.
MIN_ID_CHARS = 8
# Keep a window's counter a little past its end so late settles still find it.
QUOTA_TTL_GRACE_S = 60
MAX_NAME_CHARS = 200

# Loose on length so a future change of entropy does not lock out existing keys.
_KEY_RE = re.compile(rf"{KEY_PREFIX}[A-Za-z0-9_-]{{20,128}}")
_ID_RE = re.compile(rf"[0-9a-f]{{{MIN_ID_CHARS},64}}")

# KEYS: quota counter. ARGV: estimate, quota, ttl. Returns {granted 0/1, used after}.
_RESERVE_LUA = """
local used = tonumber(redis.call('GET', KEYS[1]) or '0')
local estimate = tonumber(ARGV[1])
if used + estimate > tonumber(ARGV[2]) then
  return {0, used}
end
used = redis.call('INCRBY', KEYS[1], estimate)
redis.call('EXPIRE', KEYS[1], ARGV[3])
return {1, used}
"""

# KEYS: quota counter. ARGV: delta. Only an existing counter is adjusted: INCRBY on an
# expired one would recreate it without a TTL (a leak) for a window that is long over.
_SETTLE_LUA = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('INCRBY', KEYS[1], ARGV[1])
return 1
"""


class KeyRecord(BaseModel):
    """What is known about a key; never the key itself.

    ``quota_tokens`` is the tenant's budget per ``window_s`` seconds (None = unlimited).
    """

    model_config = ConfigDict(frozen=True)

    key_id: str
    tenant: str
    name: str
    quota_tokens: int | None
    window_s: int
    created: int  # unix seconds

    @field_validator("quota_tokens", mode="before")
    @classmethod
    def _unlimited(cls, value: object) -> object:
        # A Redis hash holds only strings: "" stands for None there.
        return None if value == "" else value


class StoredKey(KeyRecord):
    """The Redis hash of a key (``<prefix>apikey:<digest>``): its record and its digest.

    Every value is stored as a string, ``quota_tokens`` as "" when unlimited; parsing turns
    them back into the record's types (a malformed hash raises ``ValidationError``).
    """

    digest: str

    def to_hash(self) -> dict[FieldT, EncodableT]:
        return {k: "" if v is None else str(v) for k, v in self.model_dump().items()}

    def record(self) -> KeyRecord:
        return KeyRecord.model_validate(self.model_dump(exclude={"digest"}))


@dataclass(frozen=True)
class Reservation:
    """Tokens held by ``reserve`` until ``settle``.

    ``granted`` is True when tokens were counted in Redis (``key`` is the window counter)
    and False for a key without quota (nothing to settle). A refused reservation is never
    returned: ``reserve`` raises ``QuotaExhausted`` instead.
    """

    tenant: str
    key: str
    estimate: int
    granted: bool


# -- pure helpers ---------------------------------------------------------------------


def new_api_key() -> str:
    """A fresh key: ``vk_`` + 43 url-safe characters (256 random bits)."""
    return KEY_PREFIX + secrets.token_urlsafe(KEY_ENTROPY_BYTES)


def key_digest(key: str) -> str:
    """SHA-256 hex digest of a key: what is stored instead of the key."""
    return hashlib.sha256(key.encode()).hexdigest()


def key_id_of(digest: str) -> str:
    """The public id of a key: the first 12 hex characters of its digest."""
    return digest[:KEY_ID_CHARS]


def parse_bearer(header: str | None) -> str:
    """The key from ``Authorization: Bearer <key>`` (scheme case-insensitive).

    Messages never echo the header: it may hold a real key sent with a typo.
    """
    if not header or not header.strip():
        raise Unauthorized("missing API key; send the header 'Authorization: Bearer <key>'")
    parts = header.split()
    if parts[0].lower() != "bearer":
        raise Unauthorized("unsupported authorization scheme; use 'Authorization: Bearer <key>'")
    if len(parts) != 2 or not _KEY_RE.fullmatch(parts[1]):
        raise Unauthorized(
            "malformed API key; send 'Authorization: Bearer vk_...' with the key as issued"
        )
    return parts[1]


def window_index(now: float, window_s: int) -> int:
    """Which fixed window ``now`` (unix seconds) falls in."""
    return math.floor(now / window_s)


def seconds_to_next_window(now: float, window_s: int) -> int:
    """Whole seconds until the next window starts; at least 1 (a Retry-After value)."""
    end = (window_index(now, window_s) + 1) * window_s
    return max(1, math.ceil(end - now))


def quota_key(prefix: str, tenant: str, index: int) -> str:
    return RedisNames(prefix).quota(tenant, index)


def _apikey_key(prefix: str, digest: str) -> str:
    return RedisNames(prefix).apikey(digest)


def _apikeys_set(prefix: str) -> str:
    return RedisNames(prefix).apikeys


def _text(value: str | bytes) -> str:
    """Accept clients with or without ``decode_responses``."""
    return value.decode() if isinstance(value, bytes) else value


def _record_from_hash(fields: Mapping[str, str]) -> KeyRecord:
    """Raises ValidationError on a malformed record."""
    return StoredKey.model_validate(fields).record()


def _check_key_args(tenant: str, name: str, quota_tokens: int | None, window_s: int) -> None:
    check_tenant(tenant)
    if len(name) > MAX_NAME_CHARS:
        raise InvalidRequest(f"key name is {len(name)} characters; keep it to {MAX_NAME_CHARS}")
    if quota_tokens is not None and quota_tokens < 1:
        raise InvalidRequest("quota_tokens must be >= 1, or None for no quota")
    if window_s < 1:
        raise InvalidRequest("window_s must be >= 1 second")


# -- Redis ------------------------------------------------------------------------------


async def create_key(
    redis: Redis,
    prefix: str,
    tenant: str,
    name: str,
    quota_tokens: int | None,
    window_s: int,
) -> tuple[str, KeyRecord]:
    """Issue a key for ``tenant``; returns (the key, shown only now, and its record).

    Example::

        key, record = await create_key(redis, "verifier:", "acme", "ci", 1_000_000, 3600)
    """
    _check_key_args(tenant, name, quota_tokens, window_s)
    key = new_api_key()
    digest = key_digest(key)
    stored = StoredKey(
        digest=digest,
        key_id=key_id_of(digest),
        tenant=tenant,
        name=name,
        quota_tokens=quota_tokens,
        window_s=window_s,
        created=int(time.time()),
    )
    record = stored.record()
    with unavailable("create_key"):
        async with redis.pipeline(transaction=True) as pipe:
            pipe.hset(_apikey_key(prefix, digest), mapping=stored.to_hash())
            pipe.sadd(_apikeys_set(prefix), digest)
            await pipe.execute()
    logger.info("created API key %s for tenant %s (%s)", record.key_id, tenant, name)
    return key, record


async def _digests_for(redis: Redis, prefix: str, key_or_id: str) -> list[str]:
    """The stored digests a full key or a key id (digest prefix) refers to."""
    if key_or_id.startswith(KEY_PREFIX):
        return [key_digest(key_or_id)]
    if not _ID_RE.fullmatch(key_or_id):
        raise InvalidRequest(
            f"expected a full key (vk_...) or a key id of at least {MIN_ID_CHARS} lowercase "
            "hex characters, as shown by list_keys"
        )
    # Ids are hex, so they hold no glob characters.
    matches = redis.sscan_iter(_apikeys_set(prefix), match=key_or_id + "*")
    return sorted({_text(d) async for d in matches})


async def revoke_key(redis: Redis, prefix: str, key_or_id: str) -> bool:
    """Delete a key, given the key or its id; False if nothing matched.

    An id that matches several keys is refused (``InvalidRequest``): revoke by the full
    key or a longer id instead.
    """
    with unavailable("revoke_key"):
        digests = await _digests_for(redis, prefix, key_or_id)
        if len(digests) > 1:
            ids = ", ".join(d[: len(key_or_id) + 4] for d in digests)
            raise InvalidRequest(f"key id {key_or_id} is ambiguous ({ids}); give more characters")
        if not digests:
            return False
        async with redis.pipeline(transaction=True) as pipe:
            pipe.delete(_apikey_key(prefix, digests[0]))
            pipe.srem(_apikeys_set(prefix), digests[0])
            deleted, removed = await pipe.execute()
    if deleted or removed:
        logger.info("revoked API key %s", key_id_of(digests[0]))
        return True
    return False


async def list_keys(redis: Redis, prefix: str) -> list[KeyRecord]:
    """Every key's record, oldest first (the keys themselves are not stored)."""
    with unavailable("list_keys"):
        digests = sorted(_text(d) for d in await redis.smembers(_apikeys_set(prefix)))
        async with redis.pipeline(transaction=False) as pipe:
            for digest in digests:
                pipe.hgetall(_apikey_key(prefix, digest))
            hashes: list[dict[Any, Any]] = await pipe.execute()
    records: list[KeyRecord] = []
    for digest, raw in zip(digests, hashes, strict=True):
        try:
            records.append(_record_from_hash(_decoded(raw)))
        except ValidationError:
            logger.warning("API key %s has a missing or malformed record", key_id_of(digest))
    return sorted(records, key=lambda r: (r.created, r.key_id))


def _decoded(raw: Mapping[Any, Any]) -> dict[str, str]:
    return {_text(k): _text(v) for k, v in raw.items()}


async def authenticate(redis: Redis, prefix: str, authorization_header: str | None) -> KeyRecord:
    """The record of the key in ``Authorization: Bearer <key>``, or ``Unauthorized``.

    Example::

        record = await authenticate(redis, settings.redis.prefix, request.headers.get(
            "authorization"))
    """
    key = parse_bearer(authorization_header)
    digest = key_digest(key)
    with unavailable("authenticate"):
        fields = _decoded(await redis.hgetall(_apikey_key(prefix, digest)))
    # Constant-time: the lookup already matched on the digest, but comparing the stored
    # one too rejects a record filed under the wrong name without a timing side channel.
    if not hmac.compare_digest(fields.get("digest", "").encode(), digest.encode()):
        logger.debug("rejected unknown API key %s", key_id_of(digest))
        raise Unauthorized("invalid or revoked API key; ask an admin for a new one")
    try:
        return _record_from_hash(fields)
    except ValidationError as exc:
        logger.error("API key %s has a malformed record: %r", key_id_of(digest), exc)
        raise Unauthorized("this API key's record is damaged; ask an admin for a new one") from exc


# -- quotas ---------------------------------------------------------------------------


async def reserve(
    redis: Redis, prefix: str, record: KeyRecord, estimate: int, now: float | None = None
) -> Reservation:
    """Hold ``estimate`` tokens of the tenant's quota for this window, or ``QuotaExhausted``.

    Always pair with ``settle`` (``actual=0`` if the request failed)::

        held = await reserve(redis, prefix, record, estimate=prompt_tokens + max_tokens)
        try:
            used = await run()
        except BaseException:
            await settle(redis, prefix, held, 0)
            raise
        await settle(redis, prefix, held, used)
    """
    if estimate < 0:
        raise ValueError("estimate must be >= 0 tokens")
    quota = record.quota_tokens
    if quota is None:
        return Reservation(record.tenant, "", estimate, granted=False)
    if estimate > quota:
        # Waiting for the next window would not help: no Retry-After.
        raise QuotaExhausted(
            f"this request needs ~{estimate} tokens but tenant {record.tenant} may use only "
            f"{quota} per {record.window_s} s; send a smaller request or ask for a higher quota"
        )
    now = time.time() if now is None else now
    key = quota_key(prefix, record.tenant, window_index(now, record.window_s))
    ttl = record.window_s + QUOTA_TTL_GRACE_S
    with unavailable("reserve"):
        script = redis.register_script(_RESERVE_LUA)
        granted, used = await script(keys=[key], args=[estimate, quota, ttl])
    if not granted:
        _refuse(record, estimate, int(used), now)
    return Reservation(record.tenant, key, estimate, granted=True)


def _refuse(record: KeyRecord, estimate: int, used: int, now: float) -> None:
    retry_after = seconds_to_next_window(now, record.window_s)
    logger.info(
        "quota exhausted for tenant %s (key %s): %d of %s used, %d requested",
        record.tenant,
        record.key_id,
        used,
        record.quota_tokens,
        estimate,
    )
    raise QuotaExhausted(
        f"tenant {record.tenant} used {used} of {record.quota_tokens} tokens in this "
        f"{record.window_s} s window and this request needs ~{estimate}; retry in "
        f"{retry_after} s or ask for a higher quota",
        retry_after=retry_after,
    )


async def settle(redis: Redis, prefix: str, reservation: Reservation, actual: int) -> bool:
    """Replace the reserved estimate with the ``actual`` tokens (0 refunds it all).

    Best effort, never raises on Redis errors: the request has already run, and failing
    it now would waste the work. If Redis is down the estimate stays charged. Returns
    True if the counter was adjusted.
    """
    if actual < 0:
        raise ValueError("actual must be >= 0 tokens")
    if not reservation.granted:
        return False
    delta = actual - reservation.estimate
    if delta == 0:
        return True
    try:
        script = redis.register_script(_SETTLE_LUA)
        return bool(await script(keys=[reservation.key], args=[delta]))
    except Exception as exc:
        if not is_unreachable(exc):
            raise
        logger.warning(
            "could not settle %d tokens for tenant %s: %s", delta, reservation.tenant, exc
        )
        return False
