"""Content-addressed body storage: each distinct body is stored once."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import connections, models, router, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.base.operations import BaseDatabaseOperations
from django.db.models import Field, Model
from django.utils import timezone

from cassettes_app.secrets import TextProfile
from submissions.models import Blob
from submissions.redact import redact_text

# Bodies up to this size live in the database row; larger ones go through the storage API.
INLINE_MAX = 64 * 1024
# Queued inline bytes that trigger a write, whatever the count: keeps memory flat.
PENDING_MAX_BYTES = 4 * 1024 * 1024
# Digests of blobs already queued that the writer remembers. Forgetting one costs at most
# a second INSERT that the database ignores; remembering all would grow with the archive.
SEEN_MAX = 65_536


class RawJson(str):
    """JSON text that a plain JSONField column takes as it is in `bulk_insert` (the value
    stored is the text, not a JSON string holding it). It is stored unchecked: it must be
    JSON text of the value (json's or orjson's, as `turns.message_json` writes it)."""

    __slots__ = ()


def bulk_insert(
    model: type[Model], objs: Sequence[Model | SimpleNamespace], *, ignore_conflicts: bool = False
) -> None:
    """Insert model instances (or `row_maker` rows) nothing reads the key of afterwards.

    PostgreSQL gets them by COPY, SQLite by one prepared INSERT run per row (executemany):
    no RETURNING and no per-batch SQL. `bulk_create` cost about twice the time per row,
    and on PostgreSQL INSERTs a third more server CPU than COPY (bench/bench_workers.py).
    Field values are prepared by each field as the ORM would (auto_now_add, JSON, binary).
    `ignore_conflicts` skips rows whose unique key exists (ON CONFLICT DO NOTHING).
    """
    if not objs:
        return
    meta = model._meta
    connection = connections[router.db_for_write(model)]
    fields = [f for f in meta.concrete_fields if f is not meta.auto_field]
    quote = connection.ops.quote_name
    # Only the model's own table and column names go into SQL text; values are parameters.
    table = quote(meta.db_table)
    columns = ", ".join(quote(f.column) for f in fields)
    # auto_now(_add) fields: one time for the whole batch, prepared once (not per row).
    stamped = {
        i: f.get_db_prep_save(timezone.now(), connection)
        for i, f in enumerate(fields)
        if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False)
    }
    prepare = [_preparer(f, connection) for f in fields]
    rows = [
        [stamped[i] if i in stamped else prep(obj) for i, prep in enumerate(prepare)]
        for obj in objs
    ]
    with transaction.atomic(using=connection.alias, savepoint=False), connection.cursor() as cur:
        if connection.vendor == "postgresql":
            staging = quote(f"cr_staging_{meta.db_table}") if ignore_conflicts else None
            _copy(cur, table, columns, rows, staging)
            return
        marks = ", ".join(["%s"] * len(fields))
        conflict = " ON CONFLICT DO NOTHING" if ignore_conflicts else ""
        cur.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks}){conflict}", rows)  # noqa: S608


def row_maker(model: type[Model]) -> Callable[..., SimpleNamespace]:
    """A maker of rows for `bulk_insert` that skips building model instances.

    A row is a plain object holding every column's attribute (`recording_id`, not
    `recording`), which is all bulk_insert reads; making a model instance cost ten times
    as much. auto_now(_add) columns are left out: bulk_insert stamps them. A missing or
    unknown column raises, naming it.
    """
    meta = model._meta
    needed = frozenset(
        f.attname
        for f in meta.concrete_fields
        if f is not meta.auto_field
        and not getattr(f, "auto_now", False)
        and not getattr(f, "auto_now_add", False)
    )

    def make(**values: Any) -> SimpleNamespace:
        if values.keys() != needed:
            missing = sorted(needed - values.keys())
            unknown = sorted(values.keys() - needed)
            raise TypeError(f"{meta.label} row: missing {missing}, unknown {unknown}")
        return SimpleNamespace(**values)

    return make


# Fields whose get_db_prep_save returns a str (or None) as it is, on every backend.
_TEXT_FIELDS = (models.CharField, models.TextField)


def _preparer(field: Field, connection: BaseDatabaseWrapper) -> Callable[[Any], Any]:
    """`field.get_db_prep_save(field.pre_save(obj, True), connection)` as one call per value.

    For a plain text column it reads the attribute and passes a str or None through, as the
    ORM's four calls would: they were most of the time of preparing a row.
    """
    prep = field.get_db_prep_save
    if type(field) in _TEXT_FIELDS and type(field).pre_save is Field.pre_save:
        attname = field.attname

        def text(obj: Any) -> Any:
            value = getattr(obj, attname)
            if value is None or type(value) is str:
                return value
            return prep(value, connection)

        return text
    if _plain_integer(field, connection):
        # An int (or None) passes through unchanged on a backend whose integer adapter is
        # the base one (SQLite): the ORM's calls would only check and return it.
        attname = field.attname

        def integer(obj: Any) -> Any:
            value = getattr(obj, attname)
            if value is None or type(value) is int:
                return value
            return prep(value, connection)

        return integer
    if (passes := _passes_through(field)) is not None:
        # A value of this type is what the ORM's calls would hand the driver, unchanged.
        attname = field.attname

        def plain(obj: Any) -> Any:
            value = getattr(obj, attname)
            if value is None or passes(value):
                return value
            return prep(field.pre_save(obj, True), connection)

        return plain
    if type(field) is models.BinaryField:
        attname = field.attname
        binary = connection.Database.Binary  # type: ignore[attr-defined]  # each backend's driver

        def data(obj: Any) -> Any:
            value = getattr(obj, attname)
            if type(value) is bytes:
                return binary(value)  # BinaryField.get_db_prep_value's wrapping, alone
            return prep(field.pre_save(obj, True), connection)

        return data
    if (
        type(field) is models.JSONField
        and type(field).pre_save is Field.pre_save
        and models.JSONField.get_prep_value is Field.get_prep_value
    ):
        # A dict or list goes to the backend's JSON adapter, as get_db_prep_save would hand
        # it after three calls that pass it through unchanged.
        attname = field.attname
        adapt = connection.ops.adapt_json_value
        encoder = field.encoder

        def json_value(obj: Any) -> Any:
            value = getattr(obj, attname)
            if type(value) is dict or type(value) is list:
                return adapt(value, encoder)
            if type(value) is RawJson:
                return str(value)  # the drivers bind a plain str only
            return prep(value, connection)

        return json_value
    return lambda obj: prep(field.pre_save(obj, True), connection)


def _passes_through(field: Field) -> Callable[[Any], bool] | None:
    """What tells a value the column takes as it is, if anything does: a bool for a
    BooleanField, a float for a FloatField (their get_prep_value returns such a value
    unchanged, and get_db_prep_value adds nothing), a non-empty str for a foreign key to a
    text key (the target's preparing returns it unchanged; an empty one may mean NULL).
    Exact classes only: a subclass may prepare its values its own way."""
    kind = type(field)
    if kind is models.BooleanField:
        return lambda value: type(value) is bool
    if kind is models.FloatField:
        return lambda value: type(value) is float
    if (
        isinstance(field, models.ForeignKey)
        and kind is models.ForeignKey
        and type(field.target_field) in _TEXT_FIELDS
    ):
        return lambda value: type(value) is str and value != ""
    return None


def _plain_integer(field: Field, connection: BaseDatabaseWrapper) -> bool:
    """True when get_db_prep_save(pre_save(obj)) returns an int or None as it is: an integer
    column (or a foreign key to one) with the ORM's own methods, and a backend that does
    not wrap integers (PostgreSQL's does)."""
    ops = type(connection.ops)
    if ops.adapt_integerfield_value is not BaseDatabaseOperations.adapt_integerfield_value:
        return False
    if ops.validate_autopk_value is not BaseDatabaseOperations.validate_autopk_value:
        return False
    target = field
    if isinstance(field, models.ForeignKey):
        if type(field).get_db_prep_save is not models.ForeignKey.get_db_prep_save:
            return False
        target = field.target_field
    kind = type(target)
    return (
        issubclass(kind, models.IntegerField)
        and type(field).pre_save is Field.pre_save
        and kind.get_prep_value is models.IntegerField.get_prep_value
        and kind.get_db_prep_save is Field.get_db_prep_save
        and kind.get_db_prep_value
        in (models.IntegerField.get_db_prep_value, models.AutoField.get_db_prep_value)
    )


def _copy(cur: Any, table: str, columns: str, rows: list[list], staging: str | None) -> None:
    """COPY rows into table; through a temporary staging table when some may exist already.

    COPY has no ON CONFLICT clause: the rows go to the session's staging table (emptied at
    each commit), then INSERT ... SELECT skips the ones whose key is taken.
    """
    if staging is not None:
        cur.execute(
            f"CREATE TEMP TABLE IF NOT EXISTS {staging} (LIKE {table}) ON COMMIT DELETE ROWS"
        )
    # Django's cursor wrapper has no copy(): the driver's own cursor runs it.
    with cur.cursor.copy(f"COPY {staging or table} ({columns}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)
    if staging is not None:
        cur.execute(
            f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {staging} "  # noqa: S608
            "ON CONFLICT DO NOTHING"
        )
        cur.execute(f"DELETE FROM {staging}")  # noqa: S608


def body_bytes(data: bytes, *, is_binary: bool, profile: TextProfile | None = None) -> bytes:
    """The bytes we keep for a body: text bodies pass through the secret redactor first.

    `profile` is `secrets.text_profile` of a text holding the body literally (its file, see
    `FileReport.body_profile`): the redactor skips the rules it rules out, and an empty one
    (a secret-free file) needs no redaction at all.
    """
    if is_binary or not data:
        return data
    if profile is not None and profile.empty:
        return data
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return data
    redacted = redact_text(text, profile=profile)
    return data if redacted == text else redacted.encode("utf-8")


_blob_row = row_maker(Blob)


class BlobWriter:
    """Collects blobs and writes them in bulk; the same content is written once."""

    def __init__(self, batch: int = 500, max_bytes: int = PENDING_MAX_BYTES) -> None:
        self.batch = batch
        self.max_bytes = max_bytes
        self.pending: dict[str, SimpleNamespace] = {}
        self.pending_bytes = 0
        self.seen: set[bytes] = set()  # raw sha256 digests of queued blobs (see SEEN_MAX)

    def add(
        self,
        data: bytes,
        *,
        content_type: str = "",
        is_binary: bool = False,
        truncated: bool = False,
        profile: TextProfile | None = None,
    ) -> str | None:
        """Queue a body (redacted when text) and return its sha256; None for an empty body.

        `profile`: see `body_bytes`.
        """
        data = body_bytes(data, is_binary=is_binary, profile=profile)
        if not data:
            return None
        digest = hashlib.sha256(data).digest()
        sha = digest.hex()
        if digest in self.seen:
            return sha
        if len(self.seen) >= SEEN_MAX:
            self.seen.clear()
        self.seen.add(digest)
        inline = len(data) <= INLINE_MAX
        name = ""
        if inline:
            self.pending_bytes += len(data)
        else:
            name = f"blobs/{sha[:2]}/{sha[2:4]}/{sha}"
            if not default_storage.exists(name):
                default_storage.save(name, ContentFile(data))
        self.pending[sha] = _blob_row(
            sha256=sha,
            size=len(data),
            content_type=(content_type or "")[:200],
            is_binary=is_binary,
            truncated=truncated,
            data=data if inline else None,
            storage_name=name,
        )
        if len(self.pending) >= self.batch or self.pending_bytes >= self.max_bytes:
            self.flush()
        return sha

    def flush(self) -> None:
        """Insert queued blobs; ones another submission already stored are skipped."""
        if self.pending:
            bulk_insert(Blob, list(self.pending.values()), ignore_conflicts=True)
            self.pending.clear()
            self.pending_bytes = 0


def blob_read(blob: Blob, limit: int | None = None) -> bytes:
    """A blob's bytes (at most `limit`)."""
    if blob.data is not None:
        data = bytes(blob.data)
        return data if limit is None else data[:limit]
    with default_storage.open(blob.storage_name, "rb") as handle:
        return handle.read() if limit is None else handle.read(limit)
