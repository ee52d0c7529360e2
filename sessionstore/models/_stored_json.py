"""Decoding a message from the JSON text the store wrote for it, without the checks it passed.

A message is checked when it is built from new input: the lengths and Unicode of its
text, its counts and JSON values (`_limits.py`), the normalisation of its content. Its
stored JSON is the dump of such a model, so reading it back needs none of that again.
`MESSAGE_ADAPTER` in the `STORED` context returns at once from each of these checks,
but it still calls each one in Python, several calls a message: they were a third of
the decode of a small message (issue 20).

`decode_stored` validates with a validator built from the adapter's own core schema
with those validators (`checked_on_write`) left out: pure pydantic-core, the same model
classes and the same fields, set the same way. A text it refuses (one the store never
writes, such as a content given as a string) is decoded by `MESSAGE_ADAPTER` in the
`STORED` context, so every text the adapter reads decodes to the same message.
Validation of new input keeps every check: only the store's reads of what it wrote
use this decoder.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import TYPE_CHECKING, Any, Final

from pydantic import ValidationError
from pydantic_core import SchemaValidator

from sessionstore.models._limits import STORED, is_checked_on_write
from sessionstore.models._messages import MESSAGE_ADAPTER, Message, build_message_classes

__all__ = [
    "STORED_VALIDATOR",
    "decode_stored",
    "shared_validator",
    "stored_message",
    "stored_validator",
]

_VALIDATOR_FUNCTIONS: Final = frozenset({"function-before", "function-after", "function-wrap"})
_NOT_VALIDATION: Final = frozenset({"serialization", "cls", "metadata"})
"""Keys of a core schema that hold no validator (a serializer's function is kept)."""


def _kept(schema: dict[str, Any]) -> frozenset[str]:
    """The keys of `schema` to copy as they are: none of a mapping that is not a schema.

    A schema has a string `type`; a mapping of fields (`model-fields`) may have a field
    named `type`, or `metadata`, whose value is a schema to walk.
    """
    return _NOT_VALIDATION if isinstance(schema.get("type"), str) else frozenset()


def _without_checks(schema: Any) -> Any:
    """Return a copy of a core schema with the `checked_on_write` validators left out.

    A validator is a function schema around the schema it validates after (or before, or
    around); leaving it out leaves that inner schema in its place.
    """
    if isinstance(schema, dict):
        kept = _kept(schema)
        if kept and schema["type"] in _VALIDATOR_FUNCTIONS:
            function = schema["function"]
            if isinstance(function, dict) and is_checked_on_write(function["function"]):
                return _without_checks(schema["schema"])
        return {
            key: value if key in kept else _without_checks(value) for key, value in schema.items()
        }
    if isinstance(schema, list):
        return [_without_checks(item) for item in schema]
    return schema


def _model_classes(schema: Any, found: set[type]) -> set[type]:
    """Add the classes of the model schemas in a core schema to `found`."""
    if isinstance(schema, dict):
        kept = _kept(schema)
        if kept and schema["type"] == "model":
            found.add(schema["cls"])
        for key, value in schema.items():
            if key not in kept:
                _model_classes(value, found)
    elif isinstance(schema, list):
        for item in schema:
            _model_classes(item, found)
    return found


def stored_validator() -> SchemaValidator:
    """Build the validator of stored message payloads (see the module's docstring)."""
    build_message_classes()  # each is built on first use (`defer_build`)
    schema = _without_checks(MESSAGE_ADAPTER.core_schema)
    classes = _model_classes(schema, set())
    # pydantic-core builds the schema of a model whose class is complete from the class's
    # own validator, which has every check; marked incomplete while this one is built,
    # each is built from the schema given (a test holds that no Python code runs).
    completed = {cls: cls.__pydantic_complete__ for cls in classes}  # type: ignore[attr-defined]
    for cls in classes:
        cls.__pydantic_complete__ = False  # type: ignore[attr-defined]
    try:
        return SchemaValidator(schema)
    finally:
        for cls, is_complete in completed.items():
            cls.__pydantic_complete__ = is_complete  # type: ignore[attr-defined]


@cache
def shared_validator() -> SchemaValidator:
    """The validator of stored message payloads, built on first use, then kept.

    It refuses a text `decode_stored` decodes the slow way (see the module's docstring).
    Built on first use, like the message classes (`defer_build`): a command that reads
    no message (`sessions list`) builds neither.
    """
    return stored_validator()


if TYPE_CHECKING:
    STORED_VALIDATOR: SchemaValidator


def __getattr__(name: str) -> Any:
    """`STORED_VALIDATOR`: `shared_validator()`, for the callers that name the validator."""
    if name == "STORED_VALIDATOR":
        return shared_validator()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _validate_first(text: str | bytes) -> Any:
    """Build the validator, then let every later call go straight to it."""
    global _validate_stored
    _validate_stored = shared_validator().validate_json
    return _validate_stored(text)


_validate_stored: Callable[[str | bytes], Any] = _validate_first


def decode_stored(text: str | bytes) -> Message:
    """Decode a message from JSON text the store wrote (see the module's docstring)."""
    try:
        return _validate_stored(text)  # type: ignore[no-any-return]  # one of the message classes
    except ValidationError:
        return MESSAGE_ADAPTER.validate_json(text, context=STORED)


def stored_message(payload: str | bytes, client_id: str | None) -> Message:
    """Decode a message from the JSON text the store wrote for it and its `client_id` column."""
    message = decode_stored(payload)
    if client_id is not None:
        # What `model_copy(update={"client_id": ...})` gives, without copying: the model
        # was just built here and no one else holds it yet.
        message.__dict__["client_id"] = client_id
        message.__pydantic_fields_set__.add("client_id")
    return message
