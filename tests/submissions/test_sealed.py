"""Secrets sealed at rest: the round trip, key rotation, and a clear error on a wrong key."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from django.core.exceptions import ImproperlyConfigured

from submissions.sealed import PREFIX, SecretUnreadable, derive_key, reseal, seal, unseal

SECRET = "ghp_SealedSecret0123456789abcdefXYZ"


def test_a_sealed_secret_opens_and_holds_no_plain_text(settings) -> None:
    settings.SECRET_STORE_KEYS = []
    sealed = seal(SECRET)
    assert sealed.startswith(PREFIX) and SECRET not in sealed
    assert seal(SECRET) != sealed  # a fresh IV each time: equal secrets do not look equal
    assert unseal(sealed) == SECRET
    assert seal("") == "" and unseal("") == ""


def test_the_derived_key_is_not_the_secret_key(settings) -> None:
    key = derive_key(settings.SECRET_KEY)
    assert settings.SECRET_KEY.encode() not in key and len(key) == 44
    assert derive_key(settings.SECRET_KEY + "x") != key


def test_a_changed_secret_key_says_what_happened(settings) -> None:
    settings.SECRET_STORE_KEYS = []
    sealed = seal(SECRET)
    old = settings.SECRET_KEY
    settings.SECRET_KEY = old + "-rotated"
    with pytest.raises(SecretUnreadable, match="SECRET_KEY_FALLBACKS"):
        unseal(sealed)
    settings.SECRET_KEY_FALLBACKS = [old]  # Django's own rotation opens it again
    assert unseal(sealed) == SECRET


def test_keys_rotate_through_the_list(settings) -> None:
    first, second = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.SECRET_STORE_KEYS = [first]
    sealed = seal(SECRET)
    settings.SECRET_STORE_KEYS = [second, first]
    assert unseal(sealed) == SECRET
    moved = reseal(sealed)
    settings.SECRET_STORE_KEYS = [second]
    assert unseal(moved) == SECRET
    with pytest.raises(SecretUnreadable, match="was a key removed from SECRET_STORE_KEYS"):
        unseal(sealed)


def test_a_malformed_key_is_a_configuration_error_that_does_not_repeat_it(settings) -> None:
    settings.SECRET_STORE_KEYS = ["not-a-fernet-key-but-secret"]
    with pytest.raises(ImproperlyConfigured, match="SECRET_STORE_KEYS: key 1") as caught:
        seal(SECRET)
    assert "not-a-fernet-key-but-secret" not in str(caught.value)


def test_a_value_saved_in_clear_or_altered_is_refused(settings) -> None:
    settings.SECRET_STORE_KEYS = []
    with pytest.raises(SecretUnreadable, match="not a sealed secret"):
        unseal(SECRET)
    sealed = seal(SECRET)
    with pytest.raises(SecretUnreadable):
        unseal(sealed[:-4] + ("AAAA" if not sealed.endswith("AAAA") else "BBBB"))


def test_secrets_reseal_moves_kept_tokens_to_the_first_key(
    settings, assignment, candidate, small_zip
) -> None:
    import io
    from unittest import mock

    from django.core.management import CommandError, call_command

    from submissions.intake.upload import submission_create
    from submissions.jobs import queue
    from submissions.models import Submission

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.SECRET_STORE_KEYS = [old]
    with mock.patch.object(queue, "job_enqueue", return_value=True):
        s = submission_create(
            upload=io.BytesIO(small_zip),
            filename="r.zip",
            candidate=candidate,
            assignment=assignment,
        ).submission
    Submission.objects.filter(pk=s.pk).update(source_auth_sealed=seal(SECRET))
    settings.SECRET_STORE_KEYS = [new, old]
    out = io.StringIO()
    call_command("secrets_reseal", stdout=out)
    assert "1 secret(s) sealed again" in out.getvalue()
    settings.SECRET_STORE_KEYS = [new]
    s.refresh_from_db()
    assert unseal(s.source_auth_sealed) == SECRET
    settings.SECRET_STORE_KEYS = [Fernet.generate_key().decode()]
    err = io.StringIO()
    with pytest.raises(CommandError, match="1 secret"):
        call_command("secrets_reseal", stdout=io.StringIO(), stderr=err)
    assert SECRET not in err.getvalue() and "does not open" in err.getvalue()
