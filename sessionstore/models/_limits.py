"""The limits every input is checked against, in one place: lengths, depths and number ranges.

The store's columns are sized from these constants (`store/_tables.py`), and the models
and the store's arguments are checked against them before anything is written, so every
backend answers a value over a limit the same way: a `ValueError` naming the field (a
`pydantic.ValidationError`, also a `ValueError`, when a model refuses it).

Values read back from the database are not checked again (`STORED` in the validation
context), so a row written before a limit existed stays readable. The validators that a
stored value passed when it was written are marked `checked_on_write`: the decoder of
stored messages (`_stored_json.py`) is built without them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Annotated, Any, Final, TypeVar

from pydantic import (
    AfterValidator,
    Field,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic_core import from_json

__all__ = [
    "APP_NAME_MAX_LENGTH",
    "CHECKED_JSON",
    "CLIENT_ID_MAX_LENGTH",
    "MAX_BIG_INT",
    "MAX_INT",
    "MAX_JSON_DEPTH",
    "OVERLAY_MAX_LENGTH",
    "OVERLAY_PATTERN",
    "SESSION_ID_MAX_LENGTH",
    "STORED",
    "STRATEGY_MAX_LENGTH",
    "TITLE_MAX_LENGTH",
    "TOOL_ID_MAX_LENGTH",
    "TOOL_NAME_MAX_LENGTH",
    "USER_ID_MAX_LENGTH",
    "BigCount",
    "Count",
    "IdList",
    "JsonField",
    "OverlayName",
    "Text",
    "TokenCount",
    "bounded_text",
    "check_big_count",
    "check_count",
    "check_id",
    "check_json",
    "check_json_text",
    "check_overlay",
    "check_text",
    "checked_on_write",
    "finite_duration",
    "is_checked_on_write",
    "is_stored",
    "json_copy_within_limits",
]

# ── lengths (the sizes of the text columns) ────────────────────────────────────

SESSION_ID_MAX_LENGTH: Final = 128
"""The longest session id the store accepts."""
APP_NAME_MAX_LENGTH: Final = 128
"""The longest `app_name` of a tenant."""
USER_ID_MAX_LENGTH: Final = 128
"""The longest `user_id` of a tenant."""
TITLE_MAX_LENGTH: Final = 512
"""The longest session title."""
TOOL_ID_MAX_LENGTH: Final = 255
"""The longest tool call id (of a call, and of the result that answers it)."""
TOOL_NAME_MAX_LENGTH: Final = 255
"""The longest tool name."""
CLIENT_ID_MAX_LENGTH: Final = 255
"""The longest `client_id` of a message."""
OVERLAY_MAX_LENGTH: Final = 64
"""The longest overlay name."""
STRATEGY_MAX_LENGTH: Final = 128
"""The longest strategy name a block records."""

OVERLAY_PATTERN: Final = r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}"
"""An overlay name: 1 to 64 ASCII letters, digits, `.`, `_`, `:` or `-`, starting with a
letter or a digit (`default`, `cheap`, `v2.summary`)."""

# ── numbers (the ranges of the integer columns) ────────────────────────────────

MAX_BIG_INT: Final = 2**63 - 1
"""The largest id or token total: a 64-bit column (BIGINT)."""
MAX_INT: Final = 2**31 - 1
"""The largest position, turn, generation or token count of one message: a 32-bit column."""

MAX_JSON_DEPTH: Final = 64
"""The deepest nesting of lists and objects a JSON value may have (metadata, details,
block config, custom data, format extras, tool-call arguments)."""

_STORED_KEY: Final = "sessionstore_stored"
STORED: Final[dict[str, Any]] = {_STORED_KEY: True}
"""The validation context of values read back from the database: not checked again."""
_CHECKED_JSON_KEY: Final = "sessionstore_checked_json"
CHECKED_JSON: Final[dict[str, Any]] = {_CHECKED_JSON_KEY: True}
"""The validation context of a model whose JSON fields (`JsonField`) hold copies from
`json_copy_within_limits`: they are taken as they are. The other fields are validated."""

_SURROGATE = re.compile("[\ud800-\udfff]")
_OVERLAY = re.compile(OVERLAY_PATTERN)
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")


def is_stored(info: ValidationInfo | None) -> bool:
    """Return True when a model is validated from a stored row (`STORED` context)."""
    context = None if info is None else info.context
    return isinstance(context, dict) and bool(context.get(_STORED_KEY))


_CHECKED_ON_WRITE: set[Callable[..., Any]] = set()

_Validator = TypeVar("_Validator", bound=Callable[..., Any])


def checked_on_write(validator: _Validator) -> _Validator:
    """Mark a model's validator as one a stored value passed when it was written.

    It is a check or a normalisation that, on a value the store wrote (the dump of a
    validated model), returns what it was given: in the `STORED` context it returns at
    once, or it would pass. The decoder of stored messages leaves it out. Validation of
    new input keeps it.
    """
    _CHECKED_ON_WRITE.add(validator)
    return validator


def is_checked_on_write(validator: Callable[..., Any]) -> bool:
    """Return True for a validator marked `checked_on_write` (a classmethod's function too)."""
    return getattr(validator, "__func__", validator) in _CHECKED_ON_WRITE


# ── checks (plain functions: the store's arguments, and the models' validators) ─


def check_text(value: str, name: str, *, max_length: int | None = None, min_length: int = 0) -> str:
    """Return `value` if it is valid Unicode (no lone surrogate) and of a length allowed.

    Raises:
        ValueError: naming `name`.
    """
    if not value.isascii():
        found = _SURROGATE.search(value)
        if found is not None:
            raise ValueError(
                f"{name} holds a lone surrogate (U+{ord(found.group()):04X}) at index "
                f"{found.start()}: text must be valid Unicode"
            )
    if max_length is not None and len(value) > max_length:
        raise ValueError(f"{name} is {len(value)} characters long; the limit is {max_length}")
    if len(value) < min_length:
        raise ValueError(f"{name} must be at least {min_length} character(s) long")
    return value


def check_json(value: Any, name: str) -> Any:
    """Return `value` if it is JSON the store can keep exactly on every backend.

    Refused: nesting deeper than `MAX_JSON_DEPTH`, a float that is not finite (NaN,
    Infinity), and text (keys too) with a lone surrogate. Other types are left to the model.

    Raises:
        ValueError: naming `name` and the path inside the value.
    """
    stack: list[tuple[Any, int, str]] = [(value, 0, name)]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, str):
            check_text(item, path)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise ValueError(f"{path} is {item!r}: JSON numbers must be finite")
        elif isinstance(item, dict | list | tuple):
            if depth >= MAX_JSON_DEPTH:
                raise ValueError(f"{name} is nested deeper than {MAX_JSON_DEPTH} levels")
            if isinstance(item, dict):
                for key, child in item.items():
                    if isinstance(key, str):
                        check_text(key, f"{path} key")
                    stack.append((child, depth + 1, f"{path}.{key}"))
            else:
                stack.extend((child, depth + 1, f"{path}[{i}]") for i, child in enumerate(item))
    return value


def check_json_text(text: str, name: str) -> str:
    """Return JSON `text` if it is valid Unicode and nests no deeper than `MAX_JSON_DEPTH`.

    Text that is not JSON is kept (models sometimes write it); only its brackets outside
    string literals count.
    """
    check_text(text, name)
    if text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
        return text
    depth = 0
    for bracket in _BRACKET.findall(_JSON_STRING.sub("", text)):
        depth = depth + 1 if bracket in "[{" else max(depth - 1, 0)
        if depth > MAX_JSON_DEPTH:
            raise ValueError(f"{name} is nested deeper than {MAX_JSON_DEPTH} levels")
    return text


def json_copy_within_limits(value: Any, text: str, *, nested_in: int = 0) -> Any | None:
    """Return a copy of `value` parsed from `text`, its JSON, when the text proves it within limits.

    A cheaper `check_json` for a value whose JSON text is at hand (`json.dumps(value)`):
    the copy is what `check_json` and the models' JSON validation would accept, without a
    walk in Python, when

    - pydantic-core parses `text` as strict JSON: no NaN or Infinity, no lone surrogate;
    - the parse equals `value`: the text is the value's, so `value` holds no tuple, no key
      that is not a string, and nothing else that `json.dumps` writes as other JSON;
    - `text` has fewer brackets than `MAX_JSON_DEPTH` less `nested_in` (the levels the
      copy will be nested in), so no part of it can nest too deep.

    The copy holds only `dict`, `list`, `str`, `int`, `float`, `bool` and None. Returns
    None when any of these fails: check `value` the usual way then (a number the parser
    reads as infinite, `1e999`, which `json.dumps` never writes, is refused when the
    value is serialised).
    """
    if text.count("[") + text.count("{") >= MAX_JSON_DEPTH - nested_in:
        return None
    try:
        parsed = from_json(text, allow_inf_nan=False)
    except (TypeError, ValueError):  # not strict JSON, or a str that is not valid Unicode
        return None
    return parsed if parsed == value else None


def _check_int(value: Any, name: str, low: int, high: int, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if not low <= value <= high:
        raise ValueError(f"{name} {value} is out of range: {what} is {low} to {high}")


def check_id(value: int | None, name: str) -> None:
    """Refuse an id no row can have: outside the 64-bit range of the id columns."""
    if value is not None:
        _check_int(value, name, -MAX_BIG_INT - 1, MAX_BIG_INT, "an id")


def check_count(value: int | None, name: str, *, low: int = 0) -> None:
    """Refuse a count, position or generation outside `low` .. `MAX_INT` (a 32-bit column)."""
    if value is not None:
        _check_int(value, name, low, MAX_INT, "it")


def check_big_count(value: int | None, name: str, *, low: int = 0) -> None:
    """Refuse a token total outside `low` .. `MAX_BIG_INT` (a 64-bit column)."""
    if value is not None:
        _check_int(value, name, low, MAX_BIG_INT, "it")


def finite_duration(value: float | None, name: str) -> None:
    """Refuse a duration that is negative, NaN or infinite."""
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{name} must be a finite number of milliseconds, 0 or more")


def check_overlay(name: object) -> str:
    """Return an overlay name if it follows `OVERLAY_PATTERN`.

    Raises:
        ValueError: the name is empty, too long or has other characters.
    """
    if not isinstance(name, str):
        raise TypeError(f"an overlay name is a str, not {type(name).__name__}")
    if _OVERLAY.fullmatch(name) is None:
        raise ValueError(
            f"overlay name {name!r} is invalid: use 1 to {OVERLAY_MAX_LENGTH} ASCII letters, "
            "digits, '.', '_', ':' or '-', starting with a letter or a digit"
        )
    return name


# ── annotated types for the models ─────────────────────────────────────────────


def _text_validator(
    max_length: int | None, min_length: int = 0
) -> Callable[[str, ValidationInfo], str]:
    @checked_on_write
    def validate(value: str, info: ValidationInfo) -> str:
        if is_stored(info):
            return value
        name = info.field_name or "text"
        return check_text(value, name, max_length=max_length, min_length=min_length)

    return validate


def bounded_text(max_length: int, *, min_length: int = 0) -> AfterValidator:
    """The validator of a text field of `min_length` to `max_length` characters, valid Unicode."""
    return AfterValidator(_text_validator(max_length, min_length))


@checked_on_write
def _json_validator(value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
    context = info.context
    if isinstance(context, dict) and context.get(_CHECKED_JSON_KEY):
        return value  # checked already, and JSON's own types only (`json_copy_within_limits`)
    if value and not is_stored(info):
        check_json(value, info.field_name or "value")
    return handler(value)


def _count_validator(high: int) -> Callable[[int, ValidationInfo], int]:
    @checked_on_write
    def validate(value: int, info: ValidationInfo) -> int:
        if not is_stored(info) and value > high:
            name = info.field_name or "value"
            raise ValueError(f"{name} {value} is out of range: the limit is {high}")
        return value

    return validate


@checked_on_write
def _overlay_validator(value: str, info: ValidationInfo) -> str:
    return value if is_stored(info) else check_overlay(value)


@checked_on_write
def _ids_validator(value: list[int], info: ValidationInfo) -> list[int]:
    if not is_stored(info):
        for item in value:
            check_id(item, info.field_name or "id")
    return value


Text = Annotated[str, Field(min_length=0)]
"""Text that must be valid Unicode (no lone surrogate).

pydantic-core checks that a constrained string is valid Unicode itself (error type
`string_unicode`, "unable to parse raw data as a unicode string"), so the bulk of a
message's text costs no Python call to check, on the way in or out. A test holds this.
"""
JsonField = WrapValidator(_json_validator)
"""The validator of a JSON field: finite numbers, valid Unicode, at most `MAX_JSON_DEPTH` deep."""
Count = AfterValidator(_count_validator(MAX_INT))
"""The validator of a non-negative count kept in a 32-bit column."""
BigCount = AfterValidator(_count_validator(MAX_BIG_INT))
"""The validator of a non-negative token total kept in a 64-bit column."""
TokenCount = Annotated[int, Field(ge=0), BigCount]
"""A non-negative token count of provider usage, kept in a 64-bit column: 0 to `MAX_BIG_INT`.

A count past it is refused when the model is built, the same `ValueError` on every backend
(the column would refuse it differently on each: `OverflowError` from SQLite's driver, a
data error from PostgreSQL's)."""
IdList = AfterValidator(_ids_validator)
"""The validator of a list of ids (each in the 64-bit range)."""
OverlayName = Annotated[str, AfterValidator(_overlay_validator)]
"""An overlay name, checked against `OVERLAY_PATTERN`."""
