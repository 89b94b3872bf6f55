"""Text PostgreSQL can store: a NUL character becomes U+FFFD on the way in.

A hand-in's recording may carry NUL characters (a `\\u0000` in a message, a header, a tool's
output). SQLite stores them; PostgreSQL refuses them in text ("text fields cannot contain NUL
(0x00) bytes") and in jsonb ("\\u0000 cannot be converted to text"), and the whole analysis
failed on the first one. The dumpers registered here replace each with U+FFFD, the
replacement character, in every str and every JSON value this process sends, so the
analysis stores the rest, and the page shows where a character was lost.
"""

from __future__ import annotations

import re
from typing import Any

# A \u0000 escape in JSON text: an odd run of backslashes before "u0000" (an even run is
# escaped backslashes followed by the letters u0000).
_NUL_ESCAPE = re.compile(rb"(\\+)u0000")


def _json_nul_free(data: bytes) -> bytes:
    if b"\\u0000" not in data:
        return data
    return _NUL_ESCAPE.sub(
        lambda m: m[1] + b"ufffd" if len(m[1]) % 2 else m[0],
        data,
    )


def register() -> None:
    """Register the dumpers on psycopg's global adapters (before any connection is made:
    Django's connections extend them). Without psycopg (SQLite only) there is nothing to do."""
    try:
        import psycopg
        from psycopg.types.json import Jsonb, JsonbBinaryDumper, JsonbDumper
        from psycopg.types.string import StrBinaryDumper, StrDumperUnknown
    except ImportError:
        return

    adapters = psycopg.adapters

    # The C dumpers of psycopg[binary] cannot be subclassed: these are its Python ones.
    class NulFreeText(StrDumperUnknown):
        def dump(self, obj: str) -> Any:
            return super().dump(obj.replace("\x00", "\ufffd") if "\x00" in obj else obj)

    class NulFreeBinary(StrBinaryDumper):
        def dump(self, obj: str) -> Any:
            return super().dump(obj.replace("\x00", "\ufffd") if "\x00" in obj else obj)

    class NulFreeJsonb(JsonbDumper):
        def dump(self, obj: Any) -> Any:
            data = super().dump(obj)
            return None if data is None else _json_nul_free(bytes(data))

    class NulFreeJsonbBinary(JsonbBinaryDumper):
        def dump(self, obj: Any) -> Any:
            data = super().dump(obj)
            return None if data is None else _json_nul_free(bytes(data))

    # The text dumpers last: the last one registered is also the one for PyFormat.AUTO, as
    # psycopg's own were (a str sent as text of unknown type, for the server to infer).
    adapters.register_dumper(str, NulFreeBinary)
    adapters.register_dumper(str, NulFreeText)
    adapters.register_dumper(Jsonb, NulFreeJsonbBinary)
    adapters.register_dumper(Jsonb, NulFreeJsonb)
