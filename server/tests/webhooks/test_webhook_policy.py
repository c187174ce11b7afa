"""The delivery policy as plain functions (``policy.py``): the retry decision and its backoff,
the endpoint-health rule built on it and its verdict on a batch of attempts; Standard Webhooks
signatures (``signing.py``) and encryption of secrets at rest (``crypto.SecretBox``)."""

from __future__ import annotations

import base64
import hashlib
import re
from datetime import UTC, datetime, timedelta

import pytest
from cryptography.fernet import Fernet, InvalidToken
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from commerce_api.core.timestamps import format_timestamp
from commerce_api.settings import DEFAULT_RETRY_SCHEDULE, Settings
from commerce_api.storage.crypto import SecretBox, SecretKeyMissing
from commerce_api.webhooks import policy
from commerce_api.webhooks.policy import (
    GONE_REASON,
    AttemptOutcome,
    EndpointVerdict,
    endpoint_verdicts,
    is_success,
    judge_attempt,
    retry_at,
)
from commerce_api.webhooks.signing import SECRET_BYTES, new_secret, signature_header

NOW = datetime(2026, 11, 21, 8, 12, 41, 123000, tzinfo=UTC)
SCHEDULE = DEFAULT_RETRY_SCHEDULE
SECRET_FORMAT = re.compile(r"^whsec_[A-Za-z0-9+/]{43}=$")


def decide_now(
    status_code: int | None,
    *,
    attempts_before: int = 0,
    schedule: tuple[int, ...] = SCHEDULE,
) -> AttemptOutcome:
    return judge_attempt(
        status_code=status_code, attempts_before=attempts_before, schedule=schedule, now=NOW
    )


# --- judge_attempt ---------------------------------------------------------------------------


@pytest.mark.parametrize("status_code", [200, 201, 202, 204, 299])
@pytest.mark.parametrize("attempts_before", [0, 3, len(SCHEDULE)])
def test_any_2xx_succeeds(status_code: int, attempts_before: int) -> None:
    outcome = decide_now(status_code, attempts_before=attempts_before)
    assert outcome == AttemptOutcome("succeeded", None, succeeded=True, gone=False)


@pytest.mark.parametrize("attempts_before", [0, 3, len(SCHEDULE)])
def test_410_gone_fails_the_delivery_at_once_and_marks_the_endpoint_gone(
    attempts_before: int,
) -> None:
    outcome = decide_now(410, attempts_before=attempts_before)
    assert outcome == AttemptOutcome("failed", None, succeeded=False, gone=True)


@pytest.mark.parametrize(
    "status_code", [None, 100, 199, 300, 301, 302, 304, 307, 400, 401, 404, 409, 429, 500, 503]
)
def test_anything_else_is_retried_after_the_first_delay(status_code: int | None) -> None:
    outcome = decide_now(status_code)
    assert outcome == AttemptOutcome(
        "pending", NOW + timedelta(seconds=SCHEDULE[0]), succeeded=False, gone=False
    )


@pytest.mark.parametrize("attempts_before", range(len(SCHEDULE)))
def test_the_nth_failure_is_retried_after_the_nth_delay_of_the_schedule(
    attempts_before: int,
) -> None:
    outcome = decide_now(500, attempts_before=attempts_before)
    assert outcome == AttemptOutcome(
        "pending",
        NOW + timedelta(seconds=SCHEDULE[attempts_before]),
        succeeded=False,
        gone=False,
    )


def test_the_default_schedule_is_the_documented_one() -> None:
    assert SCHEDULE == (5, 300, 1800, 7200, 18000, 36000, 36000)


def test_a_custom_schedule_is_followed() -> None:
    outcome = decide_now(None, attempts_before=1, schedule=(1, 2, 3))
    assert outcome.next_attempt_at == NOW + timedelta(seconds=2)


@pytest.mark.parametrize("status_code", [None, 302, 404, 500])
def test_a_failure_after_the_schedule_runs_out_fails_the_delivery(
    status_code: int | None,
) -> None:
    outcome = decide_now(status_code, attempts_before=len(SCHEDULE))
    assert outcome == AttemptOutcome("failed", None, succeeded=False, gone=False)


def test_an_empty_schedule_means_a_single_attempt() -> None:
    outcome = decide_now(500, schedule=())
    assert outcome == AttemptOutcome("failed", None, succeeded=False, gone=False)


@pytest.mark.parametrize("status_code", [200, 204, 299])
def test_a_2xx_delivers(status_code: int) -> None:
    assert is_success(status_code)


@pytest.mark.parametrize("status_code", [100, 199, 300, 404, 410, 500])
def test_anything_but_a_2xx_does_not_deliver(status_code: int) -> None:
    assert not is_success(status_code)


def test_the_backoff_waits_the_schedule_s_delay_for_the_attempt() -> None:
    schedule = (1, 20, 300)
    retries = [retry_at(attempts_before=n, schedule=schedule, now=NOW) for n in range(3)]
    assert retries == [NOW + timedelta(seconds=delay) for delay in schedule]


def test_the_backoff_ends_with_the_schedule() -> None:
    assert retry_at(attempts_before=3, schedule=(1, 20, 300), now=NOW) is None
    assert retry_at(attempts_before=0, schedule=(), now=NOW) is None


# --- endpoint verdicts on a batch of attempts --------------------------------------------------

OK = decide_now(200)
FAILED = decide_now(500)
GONE = decide_now(410)


def test_each_endpoint_is_judged_by_its_last_attempt_in_id_order() -> None:
    verdicts = endpoint_verdicts([("we_b", FAILED), ("we_a", OK), ("we_b", OK), ("we_a", FAILED)])
    assert verdicts == [EndpointVerdict("we_a", FAILED, False), EndpointVerdict("we_b", OK, False)]


def test_a_410_before_a_success_in_the_batch_still_disables() -> None:
    assert endpoint_verdicts([("we_a", GONE), ("we_a", OK), ("we_a", OK)]) == [
        EndpointVerdict("we_a", OK, gone_before=True)
    ]


def test_a_410_last_is_the_verdict_itself_not_a_second_one() -> None:
    assert endpoint_verdicts([("we_a", OK), ("we_a", GONE)]) == [
        EndpointVerdict("we_a", GONE, gone_before=False)
    ]


def test_no_attempts_no_verdicts() -> None:
    assert endpoint_verdicts([]) == []


# --- endpoint health: disabled after sustained failure only (since when lives in the database) --

DAYS_3 = timedelta(days=3)


def reason(*, gone: bool = False, failing_for: timedelta) -> str | None:
    return policy.disable_reason(
        gone=gone, failing_since=NOW - failing_for, now=NOW, disable_after=DAYS_3
    )


@pytest.mark.parametrize(
    "failing_for", [timedelta(0), timedelta(seconds=5), timedelta(days=2, hours=23, minutes=59)]
)
def test_failing_for_less_than_the_period_never_disables(failing_for: timedelta) -> None:
    assert reason(failing_for=failing_for) is None


@pytest.mark.parametrize("failing_for", [DAYS_3, DAYS_3 + timedelta(seconds=1), timedelta(days=30)])
def test_failing_for_the_whole_period_disables_naming_since_when(failing_for: timedelta) -> None:
    since = format_timestamp(NOW - failing_for)
    assert reason(failing_for=failing_for) == f"Every delivery attempt has failed since {since}."


def test_a_410_disables_at_once() -> None:
    assert (
        reason(gone=True, failing_for=timedelta(0))
        == GONE_REASON
        == "The receiver answered 410 Gone."
    )


def test_the_default_period_is_three_days() -> None:
    assert Settings().webhook_disable_after_seconds == DAYS_3.total_seconds()


# --- signing -----------------------------------------------------------------------------------


def test_a_new_secret_is_whsec_and_32_random_bytes_in_base64() -> None:
    secret = new_secret()
    assert SECRET_FORMAT.match(secret), secret
    assert len(base64.b64decode(secret.removeprefix("whsec_"))) == SECRET_BYTES == 32


def test_new_secrets_differ() -> None:
    assert len({new_secret() for _ in range(50)}) == 50


def signed_headers(secrets: list[str], body: str, when: datetime) -> dict[str, str]:
    return {
        "webhook-id": "evt_abc",
        "webhook-timestamp": str(int(when.timestamp())),
        "webhook-signature": signature_header(secrets, "evt_abc", when, body),
    }


def test_a_signature_verifies_with_the_standard_webhooks_library() -> None:
    secret = new_secret()
    body = '{"id":"evt_abc","type":"order.created","created_at":"x","data":{}}'
    headers = signed_headers([secret], body, datetime.now(UTC))
    assert headers["webhook-signature"].startswith("v1,")
    assert " " not in headers["webhook-signature"]
    assert Webhook(secret).verify(body, headers) is not None


def test_during_a_rotation_each_secret_verifies_on_its_own() -> None:
    new, old = new_secret(), new_secret()
    body = '{"id":"evt_abc","type":"order.fulfilled","created_at":"x","data":{"a":1}}'
    headers = signed_headers([new, old], body, datetime.now(UTC))
    signatures = headers["webhook-signature"].split(" ")
    assert len(signatures) == 2
    assert all(signature.startswith("v1,") for signature in signatures)
    for secret in (new, old):
        Webhook(secret).verify(body, headers)


def test_a_signature_does_not_verify_with_another_secret() -> None:
    body = '{"id":"evt_abc"}'
    headers = signed_headers([new_secret()], body, datetime.now(UTC))
    with pytest.raises(WebhookVerificationError):
        Webhook(new_secret()).verify(body, headers)


def test_a_signature_does_not_verify_for_a_changed_body() -> None:
    secret = new_secret()
    headers = signed_headers([secret], '{"total":10}', datetime.now(UTC))
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify('{"total":1000}', headers)


def test_a_signature_covers_the_message_id_and_timestamp() -> None:
    secret = new_secret()
    body = '{"id":"evt_abc"}'
    now = datetime.now(UTC)
    headers = signed_headers([secret], body, now)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body, {**headers, "webhook-id": "evt_other"})
    later = str(int(now.timestamp()) + 1)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(body, {**headers, "webhook-timestamp": later})


# --- encryption at rest ------------------------------------------------------------------------

KEY = "k" * 32
OTHER_KEY = "o" * 32


def test_a_secret_box_round_trips() -> None:
    secret = new_secret()
    secret_box = SecretBox(KEY)
    token = secret_box.encrypt(secret)
    assert secret_box.decrypt(token) == secret
    assert SecretBox(KEY).decrypt(token) == secret  # the key, not the instance, decides


def test_the_ciphertext_does_not_contain_the_plaintext() -> None:
    secret = new_secret()
    token = SecretBox(KEY).encrypt(secret)
    assert secret not in token
    assert secret.removeprefix("whsec_") not in token


def test_encrypting_twice_gives_different_ciphertexts() -> None:
    secret_box = SecretBox(KEY)
    secret = new_secret()
    assert secret_box.encrypt(secret) != secret_box.encrypt(secret)


def test_decrypting_with_another_key_raises_secret_key_missing() -> None:
    token = SecretBox(KEY).encrypt(new_secret())
    with pytest.raises(SecretKeyMissing, match="COMMERCE_SECRET_KEY"):
        SecretBox(OTHER_KEY).decrypt(token)


def test_decrypting_garbage_raises_secret_key_missing() -> None:
    with pytest.raises(SecretKeyMissing):
        SecretBox(KEY).decrypt("not-a-fernet-token")


def _legacy_token(key: str, plaintext: str) -> str:
    """A token as releases before HKDF made it: Fernet under the SHA-256 of the setting."""
    digest = hashlib.sha256(key.encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest)).encrypt(plaintext.encode()).decode()


def test_the_key_is_derived_with_hkdf_not_a_bare_hash() -> None:
    token = SecretBox(KEY).encrypt("s")
    digest = hashlib.sha256(KEY.encode()).digest()
    with pytest.raises(InvalidToken):
        Fernet(base64.urlsafe_b64encode(digest)).decrypt(token.encode())


def test_tokens_from_before_hkdf_are_read_and_rewritten() -> None:
    secret_box = SecretBox(KEY)
    legacy = _legacy_token(KEY, "whsec_old")
    assert secret_box.decrypt(legacy) == "whsec_old"
    assert not secret_box.is_current(legacy)
    rewritten = secret_box.reencrypt(legacy)
    assert secret_box.is_current(rewritten)
    assert secret_box.decrypt(rewritten) == "whsec_old"


def test_after_a_rotation_the_previous_key_still_decrypts_and_tokens_move_to_the_new() -> None:
    old = SecretBox(OTHER_KEY).encrypt("whsec_x")
    rotated = SecretBox(KEY, previous=OTHER_KEY)
    assert rotated.decrypt(old) == "whsec_x"
    moved = rotated.reencrypt(old)
    assert SecretBox(KEY).decrypt(moved) == "whsec_x"  # the previous key is no longer needed
    with pytest.raises(SecretKeyMissing):
        SecretBox(OTHER_KEY).decrypt(moved)
    with pytest.raises(SecretKeyMissing, match="COMMERCE_SECRET_KEY_PREVIOUS"):
        SecretBox(KEY).reencrypt(SecretBox("z" * 32).encrypt("whsec_y"))
