"""NUL characters on PostgreSQL: a reversible encoding for its text and JSON columns.

PostgreSQL's `text` and `jsonb` cannot hold U+0000, which shell and file tools print. On
PostgreSQL only, a NUL in a stored string is written as `ESCAPE + "0"` and the escape
character itself (U+10FFFF, a noncharacter) as `ESCAPE + "1"`; reads undo it. SQLite
stores every string as it is. So every valid Unicode string round-trips on both backends,
and a content hash (of the canonical JSON of the message, computed before it is stored)
is the same on both.

Every JSON and string column of the schema uses these types. A NUL counts as two
characters toward a `VARCHAR`'s length on PostgreSQL.

The encoding costs nothing on SQLite (the column types keep the plain processors) and,
on PostgreSQL, one substring scan of each serialised value on the way in and of each
string on the way out; a value holding neither character is left as it is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from sqlalchemy import JSON, Dialect, String, Text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.types import TypeDecorator, TypeEngine

__all__ = [
    "ESCAPE",
    "NulSafeJSON",
    "NulSafeJSONText",
    "NulSafeString",
    "escape",
    "escape_tree",
    "unescape",
    "unescape_json_text",
    "unescape_tree",
]

ESCAPE = "\U0010ffff"
"""The escape character: a noncharacter, so almost never in real text."""

_ESCAPED = {"\x00": ESCAPE + "0", ESCAPE: ESCAPE + "1"}
_NEEDS_ESCAPE = re.compile("[\x00\U0010ffff]")
_ENCODED = re.compile("\U0010ffff[01]")
_AS_TEXT = {ESCAPE + "0": "\x00", ESCAPE + "1": ESCAPE}
# In JSON text a NUL must stay escaped: a raw control character is not valid JSON.
_AS_JSON_TEXT = {ESCAPE + "0": "\\u0000", ESCAPE + "1": ESCAPE}
# How json.dumps writes the two characters (with and without ensure_ascii).
_JSON_MARKERS = ("\\u0000", "\\udbff\\udfff", ESCAPE)


def escape(text: str) -> str:
    """Return `text` with NUL and the escape character encoded."""
    if "\x00" not in text and ESCAPE not in text:
        return text
    return _NEEDS_ESCAPE.sub(lambda found: _ESCAPED[found.group()], text)


def unescape(text: str) -> str:
    """Undo `escape`."""
    if ESCAPE not in text:
        return text
    return _ENCODED.sub(lambda found: _AS_TEXT[found.group()], text)


def unescape_json_text(text: str) -> str:
    """Undo `escape` inside JSON text (the strings of a `jsonb` value read as text)."""
    if ESCAPE not in text:
        return text
    return _ENCODED.sub(lambda found: _AS_JSON_TEXT[found.group()], text)


def escape_tree(value: Any) -> Any:
    """Return a JSON value with every string (keys too) escaped."""
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, dict):
        return {escape(k) if isinstance(k, str) else k: escape_tree(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [escape_tree(item) for item in value]
    return value


def unescape_tree(value: Any) -> Any:
    """Undo `escape_tree`."""
    if isinstance(value, str):
        return unescape(value)
    if isinstance(value, dict):
        return {unescape(k): unescape_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [unescape_tree(item) for item in value]
    return value


def _is_postgresql(dialect: Dialect) -> bool:
    return dialect.name == "postgresql"


class NulSafeJSON(TypeDecorator[Any]):
    """A JSON column (`jsonb` on PostgreSQL) that holds NUL characters on every backend."""

    impl = JSON
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """JSONB on PostgreSQL, JSON elsewhere."""
        return dialect.type_descriptor(JSONB() if _is_postgresql(dialect) else JSON())

    def bind_processor(self, dialect: Dialect) -> Any:
        """Serialise; on PostgreSQL, encode the value's strings when it holds a NUL."""
        serialize = self.impl_instance.bind_processor(dialect)
        if not _is_postgresql(dialect) or serialize is None:
            return serialize

        def process(value: Any) -> Any:
            text = serialize(value)
            if not isinstance(text, str):
                return text
            return escape_json_text(value, text, serialize)

        return process

    def result_processor(self, dialect: Dialect, coltype: object) -> Any:
        """Deserialise; on PostgreSQL, decode the value's strings."""
        deserialize = self.impl_instance.result_processor(dialect, coltype)
        if not _is_postgresql(dialect):
            return deserialize
        if deserialize is None:
            return unescape_tree

        def process(value: Any) -> Any:
            return unescape_tree(deserialize(value))

        return process


class NulSafeJSONText(TypeDecorator[str]):
    """A JSON column read as text (`CAST(payload AS TEXT)`), decoded on PostgreSQL."""

    impl = Text
    cache_ok = True

    def result_processor(self, dialect: Dialect, coltype: object) -> Any:
        """On PostgreSQL, decode the strings of the JSON text."""
        if not _is_postgresql(dialect):
            return None

        def process(value: str | None) -> str | None:
            return value if value is None or ESCAPE not in value else unescape_json_text(value)

        return process


class NulSafeString(TypeDecorator[str]):
    """A `VARCHAR` column that holds NUL characters on every backend."""

    impl = String
    cache_ok = True

    def bind_processor(self, dialect: Dialect) -> Any:
        """On PostgreSQL, encode NUL and the escape character."""
        if not _is_postgresql(dialect):
            return None

        def process(value: str | None) -> str | None:
            return None if value is None else escape(value)

        return process

    def result_processor(self, dialect: Dialect, coltype: object) -> Any:
        """On PostgreSQL, decode what `bind_processor` encoded."""
        if not _is_postgresql(dialect):
            return None

        def process(value: str | None) -> str | None:
            return None if value is None else unescape(value)

        return process


def _compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def escape_json_text(value: Any, text: str, serialize: Callable[[Any], str] = _compact_json) -> str:
    """Return JSON text for `value` that PostgreSQL's jsonb can hold.

    `text` is `value` already serialised; it is returned as it is unless it holds a NUL
    or the escape character (the scan of the text is the cheap test), when `value`'s
    strings are encoded and serialised again with `serialize` (the rare walk).
    """
    if any(marker in text for marker in _JSON_MARKERS):
        return serialize(escape_tree(value))
    return text
