"""Messages and their content blocks: immutable pydantic models, one class per `kind`."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Sequence
from typing import Annotated, Any, Literal, TypeAlias, cast, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    NonNegativeInt,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import to_json, to_jsonable_python

from sessionstore.models._limits import (
    CLIENT_ID_MAX_LENGTH,
    STORED,
    TOOL_ID_MAX_LENGTH,
    TOOL_NAME_MAX_LENGTH,
    JsonField,
    Text,
    TokenCount,
    bounded_text,
    check_json,
    check_json_text,
    checked_on_write,
    is_stored,
)

_FROZEN = ConfigDict(frozen=True, defer_build=True, extra="forbid")

ToolId: TypeAlias = Annotated[str, bounded_text(TOOL_ID_MAX_LENGTH, min_length=1)]
"""A tool call id: 1 to 255 characters of valid Unicode."""


# ── content blocks ─────────────────────────────────────────────────────────────


class TextContent(BaseModel):
    """Plain text."""

    model_config = _FROZEN
    type: Literal["text"] = "text"
    text: Text
    """The text, exactly as written."""


class ImageContent(BaseModel):
    """An image, either inline (base64 `data`) or by `url`; exactly one of the two."""

    model_config = _FROZEN
    type: Literal["image"] = "image"
    data: Text | None = None
    """Base64-encoded image bytes, without a `data:` prefix."""
    url: Text | None = None
    """A URL the model provider can fetch."""
    mime_type: Text | None = None
    """The media type of `data`, for example `image/png`."""
    detail: Text | None = None
    """Provider hint for the resolution (`low`, `high`, `auto`), kept for export."""

    @model_validator(mode="after")
    @checked_on_write
    def _one_source(self) -> ImageContent:
        if (self.data is None) == (self.url is None):
            raise ValueError("an image needs exactly one of `data` (base64) or `url`")
        if self.data is not None:
            try:
                base64.b64decode(self.data, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ValueError(f"`data` is not valid base64: {exc}") from None
        return self

    def decoded_size(self) -> int:
        """Return the number of bytes `data` decodes to, without decoding it (0 for a URL)."""
        if self.data is None:
            return 0
        padding = len(self.data) - len(self.data.rstrip("="))
        return len(self.data) * 3 // 4 - padding


class ThinkingContent(BaseModel):
    """Model reasoning, kept so it can be replayed to providers that need it."""

    model_config = _FROZEN
    type: Literal["thinking"] = "thinking"
    thinking: Text
    """The reasoning text (empty when `redacted`)."""
    signature: Text | None = None
    """The provider's signature or opaque payload for the reasoning block."""
    redacted: bool = False
    """True for a provider-redacted block whose content travels only in `signature`."""


class ToolCall(BaseModel):
    """One tool call made by the assistant."""

    model_config = _FROZEN
    type: Literal["tool_call"] = "tool_call"
    id: ToolId
    """The call id that the matching tool result names. Ids may repeat inside a session."""
    name: Annotated[str, bounded_text(TOOL_NAME_MAX_LENGTH, min_length=1)]
    """The tool's name (1 to 255 characters)."""
    arguments: str = "{}"
    """The arguments as the model wrote them: JSON text, kept byte for byte.

    A dict is accepted on the way in and serialised to JSON. Models sometimes write
    invalid JSON; it is stored as written, because raw history is never changed. Either
    way it may nest at most `MAX_JSON_DEPTH` levels deep.
    """

    @field_validator("arguments", mode="before")
    @classmethod
    @checked_on_write
    def _arguments_to_text(cls, value: Any, info: ValidationInfo) -> Any:
        if is_stored(info):
            return value
        if isinstance(value, dict):
            return json.dumps(check_json(value, "arguments"), ensure_ascii=False)
        if isinstance(value, str):
            return check_json_text(value, "arguments")
        return value

    def parsed_arguments(self) -> Any:
        """Return the arguments decoded from JSON.

        Raises:
            ValueError: the model wrote arguments that are not valid JSON.
        """
        return json.loads(self.arguments)


UserContent: TypeAlias = Annotated[TextContent | ImageContent, Field(discriminator="type")]
AssistantContent: TypeAlias = Annotated[
    TextContent | ThinkingContent | ToolCall | ImageContent, Field(discriminator="type")
]


def _joined_text(blocks: Sequence[object]) -> str:
    """Return the text blocks among `blocks` joined by newlines."""
    return "\n".join(b.text for b in blocks if isinstance(b, TextContent))


@checked_on_write  # a stored message's content is a list already
def _text_to_blocks(value: Any) -> Any:
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    return value


# ── messages ───────────────────────────────────────────────────────────────────


class _MessageBase(BaseModel):
    model_config = _FROZEN

    client_id: Annotated[str, bounded_text(CLIENT_ID_MAX_LENGTH, min_length=1)] | None = None
    """An optional id chosen by the caller, unique per session.

    Appending a message whose `client_id` is already stored returns the stored message
    (a safe retry); the same id with different content is a `ConflictError`. It is not
    part of the content hash.
    """
    extra: Annotated[dict[str, JsonValue], JsonField] = Field(default_factory=dict)
    """Format-specific fields that the model does not name, kept for a lossless export.

    Keyed by format (`"openai"`, `"anthropic"`); the importers and exporters own them.
    """


class UserMessage(_MessageBase):
    """A message from the user: text and images. A string is accepted as one text block."""

    kind: Literal["user"] = "user"
    content: list[UserContent]
    """The blocks of the message."""
    name: Text | None = None
    """An optional participant name."""

    _blocks = field_validator("content", mode="before")(_text_to_blocks)

    @property
    def text(self) -> str:
        """The text blocks joined by newlines."""
        return _joined_text(self.content)


class Usage(BaseModel):
    """Token usage the provider reported for the model call that produced a message."""

    model_config = _FROZEN
    input_tokens: TokenCount = 0
    """Prompt tokens, cached ones included."""
    output_tokens: TokenCount = 0
    """Completion tokens, reasoning included."""
    cache_read_tokens: TokenCount = 0
    """Prompt tokens read from the provider's cache."""
    cache_write_tokens: TokenCount = 0
    """Prompt tokens written to the provider's cache."""
    reasoning_tokens: TokenCount = 0
    """The part of `output_tokens` spent on reasoning, when the provider says.

    Left out of the serialised form when 0, so messages stored before it existed keep
    their content hash.
    """

    @model_serializer(mode="wrap")
    def _omit_zero_reasoning(self, handler: SerializerFunctionWrapHandler) -> Any:
        # Payloads stored before `reasoning_tokens` existed must keep their content hash.
        data = handler(self)
        if isinstance(data, dict) and not self.reasoning_tokens:
            data.pop("reasoning_tokens", None)
        return data

    def __add__(self, other: Usage) -> Usage:
        """Return the sum of two usages, field by field (`sum(usages, Usage())` works)."""
        if not isinstance(other, Usage):
            return NotImplemented
        # A total may pass the limit of one call's count (a column's): it is not stored.
        return Usage.model_validate(
            {
                "input_tokens": self.input_tokens + other.input_tokens,
                "output_tokens": self.output_tokens + other.output_tokens,
                "cache_read_tokens": self.cache_read_tokens + other.cache_read_tokens,
                "cache_write_tokens": self.cache_write_tokens + other.cache_write_tokens,
                "reasoning_tokens": self.reasoning_tokens + other.reasoning_tokens,
            },
            context=STORED,
        )


class AssistantMessage(_MessageBase):
    """A model response: text, thinking, tool calls and images, in order."""

    kind: Literal["assistant"] = "assistant"
    content: list[AssistantContent] = Field(default_factory=list)
    """The blocks of the response, in the order the model produced them."""
    name: Text | None = None
    """An optional participant name."""
    model: Text | None = None
    """The model that wrote it, when known."""
    stop_reason: Text | None = None
    """Why generation stopped (`stop`, `tool_calls`, `length`, ...), when known."""
    usage: Usage | None = None
    """Provider-reported usage for this call, when known."""

    _blocks = field_validator("content", mode="before")(_text_to_blocks)

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tool calls, in order."""
        return [b for b in self.content if isinstance(b, ToolCall)]

    @property
    def text(self) -> str:
        """The text blocks joined by newlines."""
        return _joined_text(self.content)


class ToolResultMessage(_MessageBase):
    """The result of one tool call."""

    kind: Literal["tool_result"] = "tool_result"
    tool_call_id: ToolId
    """The id of the call this answers."""
    tool_name: Annotated[str, bounded_text(TOOL_NAME_MAX_LENGTH)] = ""
    """The name of the tool that ran (empty when the source format does not say)."""
    content: list[UserContent] = Field(default_factory=list)
    """The output: text and images."""
    is_error: bool = False
    """True when the tool failed."""

    _blocks = field_validator("content", mode="before")(_text_to_blocks)

    @property
    def text(self) -> str:
        """The text blocks joined by newlines."""
        return _joined_text(self.content)


class BashExecutionMessage(_MessageBase):
    """A shell command the user ran outside the model's tool calls, and its output."""

    kind: Literal["bash_execution"] = "bash_execution"
    command: Text
    """The command line."""
    output: Text = ""
    """Combined stdout and stderr."""
    exit_code: int | None = None
    """The exit code; None when the command did not finish."""
    cancelled: bool = False
    """True when the user cancelled the command."""
    truncated: bool = False
    """True when `output` was cut before it was stored."""


class CustomMessage(_MessageBase):
    """An extension message: application data that travels with the history."""

    kind: Literal["custom"] = "custom"
    custom_type: Annotated[str, Field(min_length=1)]
    """The application's name for this kind of message."""
    data: Annotated[JsonValue, JsonField] = None
    """The application's payload: JSON, finite numbers, at most `MAX_JSON_DEPTH` deep."""
    display: bool = True
    """Whether a UI should show it."""


class BranchSummaryMessage(_MessageBase):
    """A summary of a branch that was left, carried into the branch taken."""

    kind: Literal["branch_summary"] = "branch_summary"
    summary: Text
    """The summary text."""
    from_loop_id: int | None = None
    """The loop the summarised branch ended at, when known."""


class CompactionSummaryMessage(_MessageBase):
    """A summary that stands for compacted history."""

    kind: Literal["compaction_summary"] = "compaction_summary"
    summary: Text
    """The summary text."""
    tokens_before: NonNegativeInt | None = None
    """The estimated tokens of what was summarised."""


class SystemMessage(_MessageBase):
    """Instructions for the model. A string is accepted as one text block."""

    kind: Literal["system"] = "system"
    content: list[TextContent]
    """The blocks of the instructions."""
    name: Text | None = None
    """An optional participant name."""

    _blocks = field_validator("content", mode="before")(_text_to_blocks)

    @property
    def text(self) -> str:
        """The text blocks joined by newlines."""
        return _joined_text(self.content)


Message: TypeAlias = Annotated[
    UserMessage
    | AssistantMessage
    | ToolResultMessage
    | BashExecutionMessage
    | CustomMessage
    | BranchSummaryMessage
    | CompactionSummaryMessage
    | SystemMessage,
    Field(discriminator="kind"),
]
"""Any message, told apart by its `kind`."""

MessageKind: TypeAlias = Literal[
    "user",
    "assistant",
    "tool_result",
    "bash_execution",
    "custom",
    "branch_summary",
    "compaction_summary",
    "system",
]

MESSAGE_ADAPTER: TypeAdapter[Message] = TypeAdapter(Message, config=ConfigDict(defer_build=True))
"""Validates a dict or JSON text into the right message class."""

_CLASSES = tuple(
    value
    for value in list(globals().values())
    if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == __name__
)
"""This module's model classes, in the order they are defined (each after those it holds)."""


def build_message_classes() -> None:
    """Build every message class in the order they are defined, then `MESSAGE_ADAPTER`.

    Each is built on first use (`defer_build`), on its own. The validator of stored
    payloads (`_stored_json`) is made from the adapter's schema as it was when import
    built them all in order: each class holding the finished schemas of those it nests.
    """
    for cls in _CLASSES:
        cls.model_rebuild(force=True)
    MESSAGE_ADAPTER.rebuild(force=True)


def message_from_json(data: str | bytes) -> Message:
    """Parse one message from JSON text, choosing the class by `kind`."""
    return MESSAGE_ADAPTER.validate_json(data)


_CLIENT_ID = {"client_id"}
_CLIENT_ID_AND_EXTRA = {"client_id", "extra"}


def message_payload(message: Message) -> dict[str, Any]:
    """Return the message as the JSON-ready dict that is stored (without `client_id`)."""
    if not message.extra:
        return message.model_dump(mode="json", exclude=_CLIENT_ID)
    # `extra` apart, by pydantic-core's own conversion of JSON-like values: dumped with
    # the model, each of its values costs a Python call (the `JsonValue` union's tag),
    # most of the dump of an imported message. The same dict, keys in the same order.
    return {
        "extra": to_jsonable_python(message.extra),
        **message.model_dump(mode="json", exclude=_CLIENT_ID_AND_EXTRA),
    }


_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def canonical_payload(payload: dict[str, Any]) -> bytes:
    """Return the canonical JSON bytes of a stored payload: sorted keys, no spaces, UTF-8."""
    return _CANONICAL.encode(payload).encode()


class _NotPlain(Exception):
    """A value `canonical_message` cannot write as the dump would (it takes the dump then)."""


_SORTED_FIELDS: dict[type[BaseModel], tuple[str, ...]] = {
    cls: tuple(sorted(cls.model_fields))
    for cls in (TextContent, ImageContent, ThinkingContent, ToolCall)
}
"""Each block class's fields in canonical (sorted) order."""
_SORTED_USAGE = tuple(sorted(Usage.model_fields))
_SORTED_MESSAGE_FIELDS: dict[type[BaseModel], tuple[str, ...]] = {
    cls: tuple(sorted(set(cls.model_fields) - {"client_id"}))
    for cls in get_args(get_args(Message)[0])  # the classes of the `Message` union
}
"""Each message class's stored fields (no `client_id`) in canonical order."""


def _sorted_block(block: object) -> dict[str, Any]:
    names = _SORTED_FIELDS.get(type(block))  # type: ignore[arg-type]  # any object may come
    if names is None:
        raise _NotPlain
    fields = block.__dict__
    return {name: fields[name] for name in names}


def _sorted_usage(usage: Usage) -> dict[str, Any]:
    if type(usage) is not Usage:
        raise _NotPlain
    fields = usage.__dict__
    # As `Usage._omit_zero_reasoning` leaves a zero `reasoning_tokens` out.
    return {n: fields[n] for n in _SORTED_USAGE if n != "reasoning_tokens" or fields[n]}


_PLAIN_SCALARS = frozenset({str, int, bool, type(None)})
"""The JSON types pydantic-core writes as the canonical encoder does (no float)."""
_IN_ORDER_MAX_CONTAINERS = 50_000
"""How many dicts and lists `_in_order` looks into before it answers no (the canonical
encoder then writes the value: the same bytes; a cycle is refused there, as the dump
refuses it)."""


def _in_order(value: object) -> bool:
    """Whether pydantic-core writes this JSON value as the canonical encoder does.

    It writes dicts in their own order and floats its own way: true for JSON's types
    without floats, every dict's keys in sorted order (as an importer's records are).
    A walk with a stack, not a call a value: it runs on every message an append writes.
    """
    scalars = _PLAIN_SCALARS
    if type(value) in scalars or (type(value) is dict and not value):  # most `extra`: {}
        return True
    stack = [value]
    pop, push = stack.pop, stack.extend
    budget = _IN_ORDER_MAX_CONTAINERS  # a value that holds itself would never end the walk
    while stack:
        value = pop()
        kind = type(value)
        if kind in scalars:
            continue
        budget -= 1
        if kind is list and budget:
            push(cast("list[object]", value))
        elif kind is dict and budget:
            fields = cast("dict[object, object]", value)
            keys = [*fields]
            for key in keys:
                if type(key) is not str:
                    return False
            if keys != sorted(keys):  # type: ignore[type-var]  # strings, just checked
                return False
            push(fields.values())
        else:  # another type, or the budget is spent
            return False
    return True


def canonical_message(message: Message) -> bytes:
    """Return `canonical_payload(message_payload(message))`, written straight from the model.

    The append's hot path: the dump builds a dict of every model of the message that the
    encoder then walks and sorts again (two thirds of preparing a short message). Here
    the models' own field dicts are copied in sorted order (the dump gives the same
    values: strings, integers, booleans, None, and the block and usage models, whose one
    custom serialiser is applied here). When the JSON values (`extra`, a custom message's
    `data`) hold no float and every dict's keys in order (`_in_order`), pydantic-core
    writes the tree: the same bytes (compact, UTF-8, the same string escapes; a test
    holds it). Otherwise the canonical encoder sorts and writes it. Anything else (a
    subclass, a value only the dump converts, an error) takes the dump, which gives the
    bytes, or raises the error, it always gave.
    """
    names = _SORTED_MESSAGE_FIELDS.get(type(message))
    if names is not None:
        fields = message.__dict__
        try:
            tree = {name: fields[name] for name in names}
            # Replaced in place: a dict keeps a key's place when its value changes.
            if "content" in tree:
                tree["content"] = [_sorted_block(block) for block in tree["content"]]
            usage = tree.get("usage")
            if usage is not None:
                tree["usage"] = _sorted_usage(usage)
            if _in_order(tree.get("extra")) and _in_order(tree.get("data")):
                return to_json(tree)
            return _CANONICAL.encode(tree).encode()
        except (_NotPlain, KeyError, TypeError, ValueError, RecursionError):
            pass
    return canonical_payload(message_payload(message))


def content_hash(payload: dict[str, Any]) -> str:
    """Return the SHA-256 hex digest of the canonical payload."""
    return hashlib.sha256(canonical_payload(payload)).hexdigest()
