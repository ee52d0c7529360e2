"""NUL characters on PostgreSQL: a reversible encoding for its text and JSON columns.

PostgreSQL's `text`, `jsonb` and the text of its `json` cannot hold U+0000, which shell
and file tools print. On PostgreSQL only, a NUL in a stored string is written as
`ESCAPE + "0"` and the escape character itself (U+10FFFF, a noncharacter) as
`ESCAPE + "1"`; reads undo it. SQLite stores every string as it is. So every valid
Unicode string round-trips on both backends,
and a content hash (of the canonical JSON of the message, computed before it is stored)
is the same on both.

Every JSON and string column of the schema uses these types. A NUL counts as two
characters toward a `VARCHAR`'s length on PostgreSQL.

The encoding costs nothing on SQLite (the column types keep the plain processors) and,
on PostgreSQL, one substring scan of each serialised value on the way in and of each
string on the way out; a value holding neither character is left as it is.

Floats too must read back exactly (a content hash covers them), and `jsonb` keeps numbers
as `numeric`, which prints them without an exponent and has no negative zero: `1e300`
would read back as a 301-digit integer and `-0.0` as `0.0`. So, on PostgreSQL only, a
float whose JSON has a positive exponent is written in positional notation with a `.0`
(`1e300` as `1000...0.0`: `numeric` keeps the scale, so it reads back as the same float),
and `-0.0` as the string `ESCAPE + "2-0.0"`, decoded back to the float. Every other
number is written as it is. So a float stays a JSON number in the database, which
`jsonb` operators and casts still compare by value, except `-0.0`, which no `numeric`
can hold (it equals 0 anyway). Rows written before this encoding hold the altered value:
the information was lost when they were written.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from sqlalchemy import JSON, Dialect, String, Text
from sqlalchemy.types import TypeDecorator, TypeEngine

__all__ = [
    "ESCAPE",
    "NUMBER",
    "NulSafeJSON",
    "NulSafeJSONText",
    "NulSafeString",
    "escape",
    "escape_json_text",
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
NUMBER = ESCAPE + "2"
"""The prefix of a string that stands for a number `jsonb` cannot hold (`-0.0`)."""
_NEGATIVE_ZERO = NUMBER + "-0.0"
# What json.dumps and pydantic write for a float jsonb would alter: a positive exponent, -0.0.
_FLOAT_MARKERS = ("e+", "-0.0")
# In JSON text read from jsonb: an encoded string or a number written as a string.
_ENCODED_JSON = re.compile('\U0010ffff[01]|"\U0010ffff2(-0\\.0)"')


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
    """Undo `escape_json_text` inside JSON text (a `jsonb` value read as text)."""
    if ESCAPE not in text:
        return text
    return _ENCODED_JSON.sub(
        lambda found: found.group(1) or _AS_JSON_TEXT[found.group()],
        text,
    )


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
    """Undo `escape_tree` (and the float encoding of `escape_json_text`)."""
    if isinstance(value, str):
        return -0.0 if value == _NEGATIVE_ZERO else unescape(value)
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
        if not _is_postgresql(dialect):
            return dialect.type_descriptor(JSON())
        # Here, not at the top: a store on SQLite never loads the PostgreSQL dialect.
        from sqlalchemy.dialects.postgresql import JSONB

        return dialect.type_descriptor(JSONB())

    def bind_processor(self, dialect: Dialect) -> Any:
        """Serialise; on PostgreSQL, encode the value's strings when it holds a NUL.

        On PostgreSQL the text is written without ASCII escapes (`_compact_json`): a read
        of a JSON column as text (`NulSafeJSONText`) finds an encoded string by its escape
        character, which must be in the text as itself, not as the two surrogate escapes
        `json.dumps` writes by default. `jsonb` decoded those on the way in; a `json`
        column (`NulSafeJSONDocument`) keeps the text as sent.
        """
        if not _is_postgresql(dialect):
            return self.impl_instance.bind_processor(dialect)

        def process(value: Any) -> Any:
            return escape_json_text(_compact_json(value), lambda: value)

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


class NulSafeJSONDocument(NulSafeJSON):
    """`NulSafeJSON` kept as its text on PostgreSQL too (`json`, not `jsonb`).

    For the raw messages' payloads (migration 0014): a read sends the stored text as it
    is, where `jsonb` is printed anew for every row, and a write only checks the text,
    where `jsonb` builds its binary form. The payloads are read whole, or one path of
    them (`#>>`, `->`), which `json` answers too.
    """

    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """JSON on every backend."""
        return dialect.type_descriptor(JSON())


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


def escape_json_text(
    text: str, value_of: Callable[[], Any], serialize: Callable[[Any], str] = _compact_json
) -> str:
    """Return JSON text that PostgreSQL's jsonb can hold and give back exactly for `text`.

    `text` is a value already serialised; it is returned as it is unless it holds a NUL,
    the escape character, a positive exponent or `-0.0` (the scans of the text are the
    cheap test). Only then is the value asked for (`value_of()`: the append's payload dict
    is built for these rare texts alone), its strings encoded and serialised again with
    `serialize` (the rare walk), and, if it holds a float `jsonb` would alter, written by
    `_jsonb_text`.
    """
    if any(marker in text for marker in _FLOAT_MARKERS):
        floats: list[str] = []
        value = value_of()
        tree = _escape_floats(value, floats)
        if floats:
            return _jsonb_text(tree, floats)
        return serialize(tree) if tree is not value else text
    if any(marker in text for marker in _JSON_MARKERS):
        return serialize(escape_tree(value_of()))
    return text


def _escape_floats(value: Any, floats: list[str]) -> Any:
    """`escape_tree`, with each float jsonb would alter replaced by a placeholder.

    A placeholder is `NUL + "f" + index` (`floats[index]` is the number's text); no NUL
    is left in an escaped string, so none can be mistaken for one. Returns `value`
    itself when nothing in it needs encoding.
    """
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, float):
        if value == 0 and math.copysign(1, value) < 0:
            return _NEGATIVE_ZERO
        text = float.__repr__(value)
        if "e+" not in text:
            return value
        floats.append(format(Decimal(text), "f") + ".0")  # 1e+300 -> 1000...0.0
        return f"\x00f{len(floats) - 1}"
    if isinstance(value, dict):
        items = {
            escape(k) if isinstance(k, str) else k: _escape_floats(v, floats)
            for k, v in value.items()
        }
        changed = any(
            a is not b or ka != kb
            for (ka, a), (kb, b) in zip(value.items(), items.items(), strict=True)
        )
        return items if changed else value
    if isinstance(value, list | tuple):
        converted = [_escape_floats(item, floats) for item in value]
        changed = any(a is not b for a, b in zip(value, converted, strict=True))
        return converted if changed else value
    return value


_PLACEHOLDER = re.compile(r'"\\u0000f(\d+)"')


def _jsonb_text(tree: Any, floats: list[str]) -> str:
    """Serialise an escaped tree, writing each float placeholder as its number's text."""
    return _PLACEHOLDER.sub(lambda found: floats[int(found.group(1))], _compact_json(tree))
