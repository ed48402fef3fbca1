"""The console's signed cookies and CSRF tokens (service/api/console/sessions.py): what verifies and what does not."""

from __future__ import annotations

import pytest

from service.api.console.sessions import SECRET_ENV, ConsoleSecretError, Sessions, console_secret

SECRET = "s" * 40


def test_a_session_verifies_until_it_expires() -> None:
    now = [1_000_000.0]
    sessions = Sessions(SECRET, lifetime=60, clock=lambda: now[0])
    cookie, session = sessions.issue(7)
    assert sessions.verify(cookie) == session and session.key_id == 7 and session.expires == 1_000_060
    now[0] += 59
    assert sessions.verify(cookie) == session
    now[0] += 1
    assert sessions.verify(cookie) is None


def test_a_changed_forged_or_foreign_cookie_is_no_session() -> None:
    sessions = Sessions(SECRET)
    cookie, _ = sessions.issue(7)
    body, _, signature = cookie.rpartition(".")
    version, key_id, expires, nonce = body.split(".")
    for changed in (f"{version}.8.{expires}.{nonce}.{signature}",  # another key
                    f"{version}.{key_id}.{int(expires) + 3600}.{nonce}.{signature}",  # a later expiry
                    f"{body}.{'0' * 64}", body, "", "v1.7", "." * 5, cookie + "x", "x" * 400):
        assert sessions.verify(changed) is None, changed
    assert Sessions("t" * 40).verify(cookie) is None
    assert sessions.verify(None) is None


def test_csrf_tokens_belong_to_their_session() -> None:
    sessions = Sessions(SECRET)
    _, one = sessions.issue(7)
    _, two = sessions.issue(7)  # the same key, signed in again: another nonce, another token
    assert sessions.csrf_valid(one, sessions.csrf_token(one))
    assert not sessions.csrf_valid(one, sessions.csrf_token(two))
    assert not sessions.csrf_valid(one, None) and not sessions.csrf_valid(one, "")


def test_the_sign_in_token_goes_with_its_cookie_and_expires() -> None:
    now = [5_000.0]
    sessions = Sessions(SECRET, clock=lambda: now[0])
    cookie, token = sessions.sign_in_cookie()
    other_cookie, other_token = sessions.sign_in_cookie()
    assert sessions.sign_in_valid(cookie, token) and not sessions.sign_in_valid(cookie, other_token)
    assert not sessions.sign_in_valid(None, token) and not sessions.sign_in_valid(cookie, None)
    now[0] += 15 * 60
    assert not sessions.sign_in_valid(cookie, token)


def test_the_secret_is_the_operators_or_random() -> None:
    assert console_secret({SECRET_ENV: SECRET}) == SECRET
    drawn = {console_secret({}) for _ in range(3)}
    assert len(drawn) == 3 and all(len(s) >= 32 for s in drawn)
    with pytest.raises(ConsoleSecretError, match=SECRET_ENV):
        console_secret({SECRET_ENV: "short"})
