"""Pure parts of service.stores.auth: header parsing, digests, key format, window arithmetic."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from service.errors import InvalidRequest, QuotaExhausted, ServiceError, Unauthorized
from service.stores.auth import (
    KEY_PREFIX,
    AuthSettings,
    KeyRecord,
    StoredKey,
    check_tenant,
    key_digest,
    key_id_of,
    new_api_key,
    parse_bearer,
    quota_key,
    seconds_to_next_window,
    window_index,
)

KEY = "vk_" + "A" * 43

# -- header parsing -------------------------------------------------------------------


@pytest.mark.parametrize(
    "header",
    [f"Bearer {KEY}", f"bearer {KEY}", f"BEARER {KEY}", f"  Bearer   {KEY}  ", f"Bearer\t{KEY}"],
)
def test_parse_bearer_accepts_any_case_and_spacing(header: str) -> None:
    assert parse_bearer(header) == KEY


def test_parse_bearer_accepts_a_generated_key() -> None:
    key = new_api_key()
    assert parse_bearer(f"Bearer {key}") == key


@pytest.mark.parametrize("header", [None, "", "   "])
def test_parse_bearer_missing(header: str | None) -> None:
    with pytest.raises(Unauthorized, match="missing API key"):
        parse_bearer(header)


@pytest.mark.parametrize("header", [f"Basic {KEY}", f"Token {KEY}", KEY, f"Bearer:{KEY}"])
def test_parse_bearer_wrong_scheme(header: str) -> None:
    with pytest.raises(Unauthorized, match="scheme") as info:
        parse_bearer(header)
    assert KEY not in str(info.value)


@pytest.mark.parametrize(
    "header",
    [
        "Bearer",
        f"Bearer {KEY} extra",
        "Bearer sk_" + "A" * 43,  # not one of our keys
        "Bearer vk_short",
        "Bearer vk_" + "A" * 200,
        "Bearer vk_" + "A" * 42 + "!",
    ],
)
def test_parse_bearer_malformed_key_is_not_echoed(header: str) -> None:
    with pytest.raises(Unauthorized, match="malformed API key") as info:
        parse_bearer(header)
    for sent in header.split()[1:]:
        assert sent not in str(info.value)
        assert sent not in repr(info.value)


# -- digests and keys -----------------------------------------------------------------


def test_digest_is_stable_sha256_hex_and_not_the_key() -> None:
    key = new_api_key()
    digest = key_digest(key)
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    assert digest == key_digest(key)
    assert key not in digest
    assert key[len(KEY_PREFIX) :] not in digest
    # Known vector, so a change of algorithm cannot slip in unnoticed (stored keys would die).
    assert key_digest("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"


def test_digests_differ_for_different_keys() -> None:
    assert key_digest(KEY) != key_digest(KEY[:-1] + "B")


def test_key_id_is_the_first_12_hex_chars_of_the_digest() -> None:
    digest = key_digest(KEY)
    assert key_id_of(digest) == digest[:12]
    assert len(key_id_of(digest)) == 12


def test_new_key_format_and_entropy() -> None:
    keys = {new_api_key() for _ in range(1000)}
    assert len(keys) == 1000
    for key in keys:
        # token_urlsafe(32): 32 bytes = 256 bits -> 43 base64url characters, no padding.
        assert re.fullmatch(r"vk_[A-Za-z0-9_-]{43}", key), key
    # The random part uses the whole alphabet (a sanity check on the source, not a proof).
    alphabet = set("".join(k[3:] for k in keys))
    assert len(alphabet) == 64


# -- tenants --------------------------------------------------------------------------


@pytest.mark.parametrize("tenant", ["a", "acme", "Acme_Corp-1.eu", "x" * 64])
def test_valid_tenants(tenant: str) -> None:
    assert check_tenant(tenant) == tenant


@pytest.mark.parametrize("tenant", ["", "x" * 65, "a:b", "a b", "a/b", "acme\n", "é", "a*"])
def test_invalid_tenants(tenant: str) -> None:
    with pytest.raises(InvalidRequest, match="A-Z a-z 0-9"):
        check_tenant(tenant)


# -- windows --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("now", "window_s", "index", "left"),
    [
        (0.0, 3600, 0, 3600),
        (3599.999, 3600, 0, 1),
        (3600.0, 3600, 1, 3600),
        (3600.5, 3600, 1, 3600),  # 3599.5 s left, rounded up for Retry-After
        (7199.0, 3600, 1, 1),
        (1_700_000_123.25, 60, 28_333_335, 37),
        (10.0, 1, 10, 1),
    ],
)
def test_window_arithmetic(now: float, window_s: int, index: int, left: int) -> None:
    assert window_index(now, window_s) == index
    assert seconds_to_next_window(now, window_s) == left


def test_seconds_to_next_window_is_always_positive_and_bounded() -> None:
    for tenth in range(0, 1300):
        now = 1_700_000_000 + tenth / 10
        left = seconds_to_next_window(now, 60)
        assert 1 <= left <= 60
        # The next window really starts no later than now + left.
        assert window_index(now + left, 60) == window_index(now, 60) + 1


def test_quota_key_layout() -> None:
    assert quota_key("verifier:", "acme", 42) == "verifier:quota:acme:42"


# -- errors and settings ---------------------------------------------------------------


def test_error_classes() -> None:
    assert issubclass(Unauthorized, ServiceError)
    assert (Unauthorized.status, Unauthorized.type) == (401, "unauthorized")
    assert issubclass(QuotaExhausted, ServiceError)
    assert (QuotaExhausted.status, QuotaExhausted.type) == (429, "quota_exhausted")
    assert QuotaExhausted("x", retry_after=5).retry_after == 5


def test_auth_settings_defaults_and_bounds() -> None:
    settings = AuthSettings()
    assert settings.enabled is False
    assert settings.default_window_s == 3600
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        AuthSettings(default_window_s=0)


def test_key_record_is_frozen() -> None:
    record = KeyRecord(
        key_id="abc", tenant="acme", name="ci", quota_tokens=None, window_s=60, created=0
    )
    with pytest.raises(ValidationError, match="frozen"):
        record.tenant = "other"  # type: ignore[misc]


# A hash exactly as create_key has always written it (every value a string).
STORED = {
    "digest": "ab" * 32,
    "key_id": "ab" * 6,
    "tenant": "acme",
    "name": "ci",
    "quota_tokens": "",
    "window_s": "60",
    "created": "1764600000",
}


def test_stored_hash_parses_into_the_record() -> None:
    stored = StoredKey.model_validate(STORED)
    assert stored.record() == KeyRecord(
        key_id="ab" * 6,
        tenant="acme",
        name="ci",
        quota_tokens=None,
        window_s=60,
        created=1764600000,
    )
    limited = StoredKey.model_validate(STORED | {"quota_tokens": "5000"})
    assert limited.quota_tokens == 5000


def test_stored_key_writes_the_same_hash_it_reads() -> None:
    assert StoredKey.model_validate(STORED).to_hash() == STORED
    limited = STORED | {"quota_tokens": "5000"}
    assert StoredKey.model_validate(limited).to_hash() == limited


@pytest.mark.parametrize(
    "damage",
    [{"tenant": None}, {"window_s": "sixty"}, {"quota_tokens": "1.5"}, {"created": ""}],
)
def test_damaged_hash_is_a_validation_error(damage: dict[str, str | None]) -> None:
    fields = {k: v for k, v in (STORED | damage).items() if v is not None}
    with pytest.raises(ValidationError):
        StoredKey.model_validate(fields)
