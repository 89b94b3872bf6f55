from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from reviewer.env import Env, load_or_create_secret_key
from tests.paths import ROOT


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("1", True), ("true", True), ("YES", True), ("on", True), ("0", False), ("off", False)],
)
def test_bool_reads_common_spellings(raw: str, expected: bool) -> None:
    assert Env({"X": raw}).bool("X", not expected) is expected


def test_bool_default_when_unset() -> None:
    assert Env({}).bool("X", True) is True


def test_bool_refuses_garbage_naming_the_variable() -> None:
    with pytest.raises(ImproperlyConfigured, match="DEBUG"):
        Env({"DEBUG": "maybe"}).bool("DEBUG", False)


def test_int_reads_underscores_and_refuses_text() -> None:
    assert Env({"N": "1_000"}).int("N", 5) == 1000
    with pytest.raises(ImproperlyConfigured, match="INTAKE_MAX_FILES must be an integer"):
        Env({"INTAKE_MAX_FILES": "lots"}).int("INTAKE_MAX_FILES", 5)


def test_int_refuses_values_below_minimum() -> None:
    with pytest.raises(ImproperlyConfigured, match="at least 1"):
        Env({"N": "0"}).int("N", 5, minimum=1)


def test_float_refuses_nan_and_text() -> None:
    assert Env({"T": "2.5"}).float("T", 1.0) == 2.5
    with pytest.raises(ImproperlyConfigured, match="finite"):
        Env({"T": "nan"}).float("T", 1.0)
    with pytest.raises(ImproperlyConfigured, match="T must be a number"):
        Env({"T": "soon"}).float("T", 1.0)


def test_list_splits_on_commas_and_drops_blanks() -> None:
    assert Env({"L": "a, b,,c "}).list("L") == ["a", "b", "c"]
    assert Env({}).list("L", ["x"]) == ["x"]


def test_path_refuses_relative_paths() -> None:
    assert Env({"P": "/srv/data"}).path("P", Path("/x")) == Path("/srv/data")
    with pytest.raises(ImproperlyConfigured, match="DATA_DIR must be an absolute path"):
        Env({"DATA_DIR": "data"}).path("DATA_DIR", Path("/x"))


def test_choice_and_url_name_the_variable() -> None:
    with pytest.raises(ImproperlyConfigured, match="MODE must be one of a, b"):
        Env({"MODE": "c"}).choice("MODE", "a", ("a", "b"))
    assert Env({"U": "redis://h:1/0"}).url("U", "", schemes=("redis",)) == "redis://h:1/0"
    with pytest.raises(ImproperlyConfigured, match="U must be a URL"):
        Env({"U": "http://h"}).url("U", "", schemes=("redis",))


def test_dev_secret_key_is_generated_once_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "secret_key"
    first = load_or_create_secret_key(path)
    assert len(first) >= 40
    assert load_or_create_secret_key(path) == first
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def _boot(env: dict[str, str], code: str = "print('booted')") -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DEBUG"}}
    return subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "reviewer.settings", **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_production_refuses_to_boot_without_secret_key(tmp_path: Path) -> None:
    result = _boot({"DEBUG": "0", "DATA_DIR": str(tmp_path)})
    assert result.returncode != 0
    assert "SECRET_KEY must be set" in result.stderr


def test_production_boots_with_secret_key(tmp_path: Path) -> None:
    result = _boot({"DEBUG": "0", "SECRET_KEY": "x" * 50, "DATA_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "secret_key").exists()


def test_bad_setting_stops_boot_with_its_name(tmp_path: Path) -> None:
    result = _boot({"DATA_DIR": str(tmp_path), "JOB_MAX_ATTEMPTS": "three"})
    assert result.returncode != 0
    assert "JOB_MAX_ATTEMPTS must be an integer" in result.stderr


def test_time_limits_must_be_ordered(tmp_path: Path) -> None:
    result = _boot(
        {"DATA_DIR": str(tmp_path), "JOB_SOFT_TIME_LIMIT": "100", "JOB_TIME_LIMIT": "50"}
    )
    assert "JOB_TIME_LIMIT must be greater" in result.stderr


def test_database_url_selects_postgres(tmp_path: Path) -> None:
    code = (
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.DATABASES['default']['ENGINE'], settings.CELERY_BROKER_URL)"
    )
    clean = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={
            **clean,
            "DJANGO_SETTINGS_MODULE": "reviewer.settings",
            "DATA_DIR": str(tmp_path),
            "DATABASE_URL": "postgres://u@db.example:5432/x",
            "REDIS_URL": "redis://broker.example:6379/0",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "postgresql" in result.stdout
    assert "redis://broker.example:6379/0" in result.stdout


def test_storage_is_the_filesystem_by_default_and_any_dotted_path_is_kept() -> None:
    from reviewer.env import default_storage_setting

    assert default_storage_setting(Env({})) == {
        "BACKEND": "django.core.files.storage.FileSystemStorage"
    }
    custom = {"STORAGE_BACKEND": "myapp.storage.Vault"}
    assert default_storage_setting(Env(custom)) == {"BACKEND": "myapp.storage.Vault"}


def test_s3_storage_reads_bucket_endpoint_region_keys_and_style() -> None:
    from reviewer.env import default_storage_setting

    setting = default_storage_setting(
        Env({"STORAGE_BACKEND": "s3", "S3_BUCKET": "handins",
             "S3_ENDPOINT_URL": "http://minio:9000", "S3_REGION": "eu-west-1",
             "S3_ACCESS_KEY_ID": "AKID", "S3_SECRET_ACCESS_KEY": "sekrit",
             "S3_ADDRESSING_STYLE": "path"})
    )  # fmt: skip
    assert setting == {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {"bucket_name": "handins", "addressing_style": "path", "file_overwrite": False,
                    "max_memory_size": 2 * 2**20,
                    "endpoint_url": "http://minio:9000", "region_name": "eu-west-1",
                    "access_key": "AKID", "secret_key": "sekrit"},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("env", "message"),
    [({}, "STORAGE_BACKEND is s3 but S3_BUCKET is not set"),
     ({"S3_BUCKET": "b", "S3_ACCESS_KEY_ID": "AKID"}, "set together, or neither"),
     ({"S3_BUCKET": "b", "S3_ADDRESSING_STYLE": "sideways"}, "S3_ADDRESSING_STYLE must be one of"),
     ({"S3_BUCKET": "b", "S3_ENDPOINT_URL": "minio:9000"}, "S3_ENDPOINT_URL must be a URL")],
)  # fmt: skip
def test_s3_storage_refuses_a_missing_bucket_or_half_a_key(env, message) -> None:
    from reviewer.env import default_storage_setting

    with pytest.raises(ImproperlyConfigured, match=message):
        default_storage_setting(Env({"STORAGE_BACKEND": "s3", **env}))


def test_s3_without_a_bucket_stops_the_boot_saying_so(tmp_path: Path) -> None:
    result = _boot({"DATA_DIR": str(tmp_path), "STORAGE_BACKEND": "s3", "S3_BUCKET": ""})
    assert result.returncode != 0
    assert "S3_BUCKET is not set" in result.stderr


def test_the_embedded_broker_publishes_without_a_warning_about_a_host(tmp_path: Path) -> None:
    # kombu warned "No hostname was supplied. Reverting to default 'localhost'" on every
    # publish to a bare filesystem:// URL: a new user read it as a server that was not there.
    result = _boot(
        {"DATA_DIR": str(tmp_path), "REDIS_URL": ""},
        "import logging; logging.basicConfig(); from reviewer.celery import app; "
        "print(app.connection_for_write().info()['transport'])",
    )
    assert result.returncode == 0, result.stderr
    # kombu's filesystem transport, with whole messages only (reviewer/broker.py)
    assert result.stdout.strip() == "reviewer.broker:Transport"
    assert "hostname" not in result.stderr


def _sqlite_boot(data_dir: Path) -> subprocess.CompletedProcess[str]:
    """Boot on the embedded SQLite database in data_dir, write a row, print its settings."""
    code = (
        "import django; django.setup(); from django.db import connection; "
        "cur = connection.cursor(); "
        "cur.execute('CREATE TABLE IF NOT EXISTS t (x BLOB)'); "
        "cur.execute('INSERT INTO t VALUES (zeroblob(40000))'); "
        "print(*(cur.execute(f'PRAGMA {p}').fetchone()[0] "
        "for p in ('page_size', 'journal_mode', 'synchronous')), "
        "cur.execute('SELECT count(*) FROM t').fetchone()[0])"
    )
    clean = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "reviewer.settings", "DATA_DIR": str(data_dir)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_new_sqlite_database_gets_large_pages_and_an_old_one_keeps_its_own(
    tmp_path: Path,
) -> None:
    """Bodies live in their rows: a new embedded database is made with large pages, in WAL
    mode; one made before (4 KiB pages) opens as it was, its rows kept."""
    import sqlite3

    from django.conf import settings

    new = _sqlite_boot(tmp_path / "new")
    assert new.returncode == 0, new.stderr
    assert new.stdout.split() == [str(settings.SQLITE_PAGE_BYTES), "wal", "1", "1"]
    again = _sqlite_boot(tmp_path / "new")
    assert again.stdout.split() == [str(settings.SQLITE_PAGE_BYTES), "wal", "1", "2"]

    (tmp_path / "old").mkdir()
    with sqlite3.connect(tmp_path / "old" / "db.sqlite3") as old_db:
        old_db.execute("PRAGMA journal_mode=WAL")
        old_db.execute("CREATE TABLE t (x BLOB)")
        old_db.execute("INSERT INTO t VALUES (zeroblob(10))")
    old_db.close()
    old = _sqlite_boot(tmp_path / "old")
    assert old.returncode == 0, old.stderr
    assert old.stdout.split() == ["4096", "wal", "1", "2"]
