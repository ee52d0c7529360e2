"""Token accounting: the `TokenCounter` protocol and its counters (pure).

The heuristic is the one the seed specifies, kept exactly so that budgets mean the
same thing everywhere: ceil(UTF-8 bytes / 4) for text, clamp(decoded bytes / 750, 85,
16000) for an image, name + arguments + 8 for a tool call, +4 framing for a message,
content + tool name + 8 for a tool result. The kinds providers have no role for (shell
commands, summaries, custom messages) are counted as the text they are sent as, + 4: what
is counted is what is sent (the seed counts a custom message's bare JSON).

`TiktokenCounter` counts text exactly with tiktoken and keeps the same framing rules,
and `CalibratedTokenCounter` scales another counter by what the provider reports.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from sessionstore.errors import ConfigurationError, MissingDependencyError
from sessionstore.formats._text import render_as_text
from sessionstore.models import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    Message,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)

if TYPE_CHECKING:
    import tiktoken

__all__ = [
    "CalibratedTokenCounter",
    "HeuristicTokenCounter",
    "TiktokenCounter",
    "TokenCounter",
    "content_tokens",
    "estimate_tokens",
    "message_tokens",
]

IMAGE_BYTES_PER_TOKEN = 750
IMAGE_MIN_TOKENS = 85
IMAGE_MAX_TOKENS = 16_000
MESSAGE_FRAMING = 4
TOOL_CALL_OVERHEAD = 8
TOOL_RESULT_OVERHEAD = 8


def estimate_tokens(text: str) -> int:
    """Return ceil(UTF-8 bytes / 4): about four bytes a token for English text.

    An ASCII text's length is its UTF-8 length (`isascii` reads a flag the string keeps:
    no copy, where `encode` copies the text for every count of every appended message).
    """
    return -(-(len(text) if text.isascii() else len(text.encode())) // 4)


def content_tokens(
    content: Iterable[TextContent | ImageContent | ThinkingContent | ToolCall],
    count_text: Callable[[str], int] = estimate_tokens,
) -> int:
    """Return the token count of a list of content blocks.

    Args:
        content: The blocks.
        count_text: Counts the tokens of a text (the heuristic by default). Images are
            always counted by the heuristic's size rule, which knows no text.
    """
    total = 0
    for block in content:
        if isinstance(block, TextContent):
            total += count_text(block.text)
        elif isinstance(block, ImageContent):
            total += min(
                max(block.decoded_size() // IMAGE_BYTES_PER_TOKEN, IMAGE_MIN_TOKENS),
                IMAGE_MAX_TOKENS,
            )
        elif isinstance(block, ThinkingContent):
            total += count_text(block.thinking)
        else:
            total += count_text(block.name) + count_text(block.arguments) + TOOL_CALL_OVERHEAD
    return total


def message_tokens(message: Message, count_text: Callable[[str], int] = estimate_tokens) -> int:
    """Return the token count of one message, framing included.

    The seed names user, assistant and tool result messages. The other kinds are
    counted as the text the model is shown for them (`render_as_text`), plus the
    message framing: a custom message with `display=False` is not sent and counts 0.

    Args:
        message: The message.
        count_text: Counts the tokens of a text (the heuristic by default); the framing
            constants and the image rule stay the same whatever counts the text.
    """
    if isinstance(message, UserMessage | AssistantMessage | SystemMessage):
        return content_tokens(message.content, count_text) + MESSAGE_FRAMING
    if isinstance(message, ToolResultMessage):
        return (
            content_tokens(message.content, count_text)
            + count_text(message.tool_name)
            + TOOL_RESULT_OVERHEAD
        )
    if isinstance(
        message,
        CustomMessage | BashExecutionMessage | BranchSummaryMessage | CompactionSummaryMessage,
    ):
        return _rendered_tokens(message, count_text)
    raise TypeError(f"not a message: {type(message).__name__}")


def _rendered_tokens(
    message: CustomMessage | BashExecutionMessage | BranchSummaryMessage | CompactionSummaryMessage,
    count_text: Callable[[str], int],
) -> int:
    # Providers have no role for these kinds: they are sent as the text `render_as_text`
    # writes (labels, fences, exit code included), so that is what is counted. A custom
    # message not displayed is not sent at all.
    text = render_as_text(message)
    return 0 if text is None else count_text(text) + MESSAGE_FRAMING


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens. The store caches `count_message` once per message, when appended."""

    def count_text(self, text: str) -> int:
        """Return the token count of a text."""
        ...

    def count_message(self, message: Message) -> int:
        """Return the token count of one message, framing included."""
        ...


class HeuristicTokenCounter:
    """The default counter: the seed's byte heuristic, offline and deterministic."""

    def count_text(self, text: str) -> int:
        """Return ceil(UTF-8 bytes / 4)."""
        return estimate_tokens(text)

    def count_message(self, message: Message) -> int:
        """Return the heuristic token count of one message."""
        return message_tokens(message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class TiktokenCounter:
    """Exact text counts through a tiktoken encoding, with the heuristic's message framing.

    Only the text is counted differently: images, per-message framing and the tool-call
    and tool-result overheads follow the same rules as `HeuristicTokenCounter`, so the
    two counters differ exactly where the heuristic guesses. Needs the `tiktoken` extra.

    >>> counter = TiktokenCounter("o200k_base")  # doctest: +SKIP
    >>> counter.count_text("hello world")  # doctest: +SKIP
    2

    Args:
        encoding: An encoding name for `tiktoken.get_encoding`, or an `Encoding` object.
            tiktoken downloads an encoding the first time it is named; offline, point
            `TIKTOKEN_CACHE_DIR` at a directory that holds it, or pass an `Encoding`.

    Raises:
        MissingDependencyError: tiktoken is not installed.
        ConfigurationError: the named encoding is unknown or cannot be loaded.
    """

    def __init__(self, encoding: str | tiktoken.Encoding = "o200k_base") -> None:
        # Imported here, not at the top: tiktoken is an optional extra.
        try:
            import tiktoken
        except ImportError as exc:
            raise MissingDependencyError(
                "TiktokenCounter needs tiktoken, which is not installed: "
                'pip install "sessionstore[tiktoken]"'
            ) from exc
        if isinstance(encoding, str):
            try:
                encoding = tiktoken.get_encoding(encoding)
            except (ValueError, OSError) as exc:  # an unknown name, a failed download or read
                reason = str(exc).splitlines()[0].rstrip(".") if str(exc) else type(exc).__name__
                raise ConfigurationError(
                    f"cannot load the tiktoken encoding {encoding!r} ({reason}). tiktoken "
                    "downloads an encoding on first use; offline, set TIKTOKEN_CACHE_DIR to a "
                    "directory that holds it, or pass a tiktoken.Encoding object"
                ) from exc
        elif not isinstance(encoding, tiktoken.Encoding):
            raise TypeError(
                f"encoding must be a name or a tiktoken.Encoding, not {type(encoding).__name__}"
            )
        self._encoding = encoding
        # Bound once: count_text runs for every text block of every message.
        self._encode = encoding.encode_ordinary

    @property
    def encoding(self) -> tiktoken.Encoding:
        """The tiktoken encoding in use."""
        return self._encoding

    def count_text(self, text: str) -> int:
        """Return the number of tokens the encoding splits `text` into.

        Text that looks like a special token (`<|endoftext|>`) is counted as plain text,
        the way a provider counts it inside a message.
        """
        return len(self._encode(text))

    def count_message(self, message: Message) -> int:
        """Return the token count of one message: exact text plus the heuristic's framing."""
        return message_tokens(message, self.count_text)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._encoding.name!r})"


def _ceil_scaled(tokens: int, factor: float) -> int:
    # Rounding first keeps float noise from adding a token: 27 * (7 / 3) is 63.00000000000001.
    return math.ceil(round(tokens * factor, 6))


class CalibratedTokenCounter:
    """Another counter scaled by a factor learnt from the prompt sizes a provider reports.

    Each `record_usage` compares the provider's `prompt_tokens` with the base counter's
    estimate of the same prompt. The first sample sets the factor to that ratio; later
    ones move it by exponential smoothing, `factor += smoothing * (ratio - factor)`. The
    factor is clamped to `[min_factor, max_factor]` so that one odd report (a prompt
    with many images, a provider that counts tool schemas) cannot run away with it.

    >>> from sessionstore.models import UserMessage
    >>> counter = CalibratedTokenCounter()
    >>> messages = [UserMessage(content="x" * 400)]  # the heuristic says 104
    >>> counter.record_usage(130, messages)
    1.25
    >>> counter.count_text("x" * 400)  # 100 * 1.25
    125

    Args:
        base: The counter to correct (the seed heuristic by default).
        smoothing: The weight of a new sample, in (0, 1]; 1 keeps only the latest.
        min_factor: The smallest factor allowed (positive).
        max_factor: The largest factor allowed (at least `min_factor`).

    Raises:
        ValueError: `smoothing` is outside (0, 1], or the bounds are not positive, finite
            and ordered.
    """

    def __init__(
        self,
        base: TokenCounter | None = None,
        *,
        smoothing: float = 0.3,
        min_factor: float = 0.25,
        max_factor: float = 4.0,
    ) -> None:
        if not 0 < smoothing <= 1:
            raise ValueError(f"smoothing must be in (0, 1], got {smoothing}")
        if not 0 < min_factor <= max_factor < math.inf:
            raise ValueError(
                "min_factor and max_factor must be finite and 0 < min_factor <= max_factor, "
                f"got min_factor={min_factor}, max_factor={max_factor}"
            )
        self._base: TokenCounter = base if base is not None else HeuristicTokenCounter()
        self._smoothing = smoothing
        self._min_factor = min_factor
        self._max_factor = max_factor
        self._factor = min(max(1.0, min_factor), max_factor)
        self._samples = 0

    @property
    def base(self) -> TokenCounter:
        """The counter whose counts are scaled."""
        return self._base

    @property
    def factor(self) -> float:
        """The current correction factor (1.0, or the nearest bound, before any sample)."""
        return self._factor

    @property
    def samples(self) -> int:
        """How many usage reports have been recorded."""
        return self._samples

    def record_usage(
        self,
        prompt_tokens: int,
        messages: Sequence[Message],
        *,
        system_prompt_tokens: int = 0,
    ) -> float:
        """Learn from one provider report and return the new factor.

        Args:
            prompt_tokens: The prompt size the provider reported for a call.
            messages: The messages that call sent.
            system_prompt_tokens: Tokens the prompt held besides `messages` (system prompt,
                tool definitions), as the base counter would count them.

        Raises:
            ValueError: `prompt_tokens` is not positive, `messages` is empty or
                `system_prompt_tokens` is negative.
        """
        if not messages:
            raise ValueError("record_usage needs the messages the provider counted, got none")
        if system_prompt_tokens < 0:
            raise ValueError(
                f"system_prompt_tokens must not be negative, got {system_prompt_tokens}"
            )
        count = self._base.count_message
        estimate = sum(count(message) for message in messages) + system_prompt_tokens
        return self.record_estimate(prompt_tokens, estimate)

    def record_estimate(self, prompt_tokens: int, estimated_tokens: int) -> float:
        """Learn from a provider report and the base estimate of the same prompt.

        Use it when the estimate is at hand already, for example the sum of the token
        counts the store cached for the messages it built the context from.

        Args:
            prompt_tokens: The prompt size the provider reported.
            estimated_tokens: The base counter's count of that prompt.

        Returns:
            The new factor.

        Raises:
            ValueError: either count is not positive.
        """
        if prompt_tokens <= 0:
            raise ValueError(f"prompt_tokens must be positive, got {prompt_tokens}")
        if estimated_tokens <= 0:
            raise ValueError(f"the estimated prompt must be positive, got {estimated_tokens}")
        ratio = prompt_tokens / estimated_tokens
        factor = (
            ratio if self._samples == 0 else self._factor + self._smoothing * (ratio - self._factor)
        )
        self._factor = min(max(factor, self._min_factor), self._max_factor)
        self._samples += 1
        return self._factor

    def scale(self, tokens: int) -> int:
        """Return ceil(`tokens` * factor): a count made by the base counter, corrected.

        This is how cached counts are corrected without counting the text again.

        Raises:
            ValueError: `tokens` is negative.
        """
        if tokens < 0:
            raise ValueError(f"tokens must not be negative, got {tokens}")
        return _ceil_scaled(tokens, self._factor)

    def count_text(self, text: str) -> int:
        """Return the base count of `text`, scaled by the factor."""
        return _ceil_scaled(self._base.count_text(text), self._factor)

    def count_message(self, message: Message) -> int:
        """Return the base count of one message, scaled by the factor."""
        return _ceil_scaled(self._base.count_message(message), self._factor)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self._base!r}, factor={self._factor:.4g}, "
            f"samples={self._samples})"
        )
