"""Typed readers for settings that come from environment variables."""

from __future__ import annotations

import builtins
import os
from collections.abc import Mapping
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


class Env:
    """Reads typed values from a mapping; a bad value raises ImproperlyConfigured naming it."""

    # The readers are named after the types they return, so below `def str` the name `str` is
    # that method inside this class body: annotations there spell `builtins.str`.

    def __init__(self, environ: Mapping[str, str] | None = None) -> None:
        self.environ = os.environ if environ is None else environ

    def str(self, name: str, default: str = "") -> str:
        """A string, or the default when unset."""
        return self.environ.get(name, default)

    def bool(self, name: builtins.str, default: bool) -> bool:
        """A boolean written as 1/0, true/false, yes/no or on/off."""
        raw = self.environ.get(name)
        if raw is None:
            return default
        value = raw.strip().lower()
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {raw!r}")

    def int(self, name: builtins.str, default: int, *, minimum: int | None = 0) -> int:
        """An integer, at least `minimum` when one is given."""
        raw = self.environ.get(name)
        if raw is None or raw.strip() == "":
            return default
        try:
            value = int(raw.strip().replace("_", ""))
        except ValueError:
            raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
        if minimum is not None and value < minimum:
            raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
        return value

    def float(self, name: builtins.str, default: float, *, minimum: float | None = 0.0) -> float:
        """A float, at least `minimum` when one is given."""
        raw = self.environ.get(name)
        if raw is None or raw.strip() == "":
            return default
        try:
            value = float(raw.strip())
        except ValueError:
            raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise ImproperlyConfigured(f"{name} must be a finite number, got {raw!r}")
        if minimum is not None and value < minimum:
            raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {value}")
        return value

    def list(
        self, name: builtins.str, default: list[builtins.str] | None = None
    ) -> list[builtins.str]:
        """A comma-separated list; blanks dropped."""
        raw = self.environ.get(name)
        if raw is None:
            return list(default or [])
        return [item.strip() for item in raw.split(",") if item.strip()]

    def path(self, name: builtins.str, default: Path) -> Path:
        """An absolute filesystem path (relative values are refused: they depend on the cwd)."""
        raw = self.environ.get(name)
        if raw is None or raw.strip() == "":
            return default
        path = Path(raw.strip()).expanduser()
        if not path.is_absolute():
            raise ImproperlyConfigured(f"{name} must be an absolute path, got {raw!r}")
        return path

    def choice(
        self, name: builtins.str, default: builtins.str, choices: tuple[builtins.str, ...]
    ) -> builtins.str:
        """One of a fixed set of strings."""
        value = self.environ.get(name, default).strip()
        if value not in choices:
            allowed = ", ".join(choices)
            raise ImproperlyConfigured(f"{name} must be one of {allowed}, got {value!r}")
        return value

    def url(
        self, name: builtins.str, default: builtins.str, *, schemes: tuple[builtins.str, ...]
    ) -> builtins.str:
        """A URL whose scheme is one of `schemes`."""
        value = self.environ.get(name, default).strip()
        scheme = value.split("://", 1)[0] if "://" in value else ""
        if scheme not in schemes:
            allowed = ", ".join(schemes)
            raise ImproperlyConfigured(f"{name} must be a URL with scheme {allowed}, got {value!r}")
        return value


def load_or_create_secret_key(path: Path) -> str:
    """Read the development secret key kept outside the repo, generating it on first use."""
    from django.core.management.utils import get_random_secret_key

    try:
        key = path.read_text().strip()
        if key:
            return key
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    key = get_random_secret_key()
    # O_EXCL: two processes starting at once must not each write a different key.
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        handle.write(key)
    return key


FILESYSTEM_STORAGE = "django.core.files.storage.FileSystemStorage"
S3_STORAGE = "storages.backends.s3.S3Storage"
_S3_STORAGES = {S3_STORAGE, "storages.backends.s3boto3.S3Boto3Storage"}


def default_storage_setting(env: Env) -> dict[str, object]:
    """STORAGES["default"] from STORAGE_BACKEND: a storage class's dotted path, or `s3`.

    For S3 (or any S3-compatible server: MinIO, Ceph, R2, ...) the bucket, endpoint URL,
    region, access keys and addressing style come from S3_*; a missing bucket stops the boot
    here rather than every upload later ("Required parameter name not set").
    """
    backend = env.str("STORAGE_BACKEND", FILESYSTEM_STORAGE).strip() or FILESYSTEM_STORAGE
    if backend.lower() == "s3":
        backend = S3_STORAGE
    if backend not in _S3_STORAGES:
        return {"BACKEND": backend}
    bucket = env.str("S3_BUCKET").strip()
    if not bucket:
        raise ImproperlyConfigured(
            "STORAGE_BACKEND is s3 but S3_BUCKET is not set: name the bucket that keeps the"
            " hand-ins (and S3_ENDPOINT_URL for a server other than AWS)"
        )
    options: dict[str, object] = {
        "bucket_name": bucket,
        # botocore's own: "path" for most self-hosted servers (MinIO), "virtual" for AWS.
        "addressing_style": env.choice("S3_ADDRESSING_STYLE", "auto", ("auto", "path", "virtual")),
        # Names carry the archive's hash: an upload never replaces another's object.
        "file_overwrite": False,
        # A stored object opened for reading is downloaded into a spooled file; past this it
        # goes to disk (the default, 0, keeps a whole 50 MiB archive in memory).
        "max_memory_size": 2 * 2**20,
    }
    if env.str("S3_ENDPOINT_URL").strip():
        options["endpoint_url"] = env.url("S3_ENDPOINT_URL", "", schemes=("http", "https"))
    if env.str("S3_REGION").strip():
        options["region_name"] = env.str("S3_REGION").strip()
    key, secret = env.str("S3_ACCESS_KEY_ID").strip(), env.str("S3_SECRET_ACCESS_KEY").strip()
    if bool(key) != bool(secret):
        raise ImproperlyConfigured(
            "S3_ACCESS_KEY_ID and S3_SECRET_ACCESS_KEY are set together, or neither"
            " (then boto3 finds credentials itself: AWS_* variables, an instance role)"
        )
    if key:
        options["access_key"] = key
        options["secret_key"] = secret
    return {"BACKEND": backend, "OPTIONS": options}
