"""The token counters: the seed heuristic, tiktoken and the calibrated counter."""

from __future__ import annotations

import base64
import doctest
import math
import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sessionstore._tokens
import sessionstore._tracker
from sessionstore import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CalibratedTokenCounter,
    CompactionSummaryMessage,
    CustomMessage,
    HeuristicTokenCounter,
    ImageContent,
    Message,
    SystemMessage,
    TextContent,
    ThinkingContent,
    TiktokenCounter,
    TokenCounter,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    estimate_tokens,
)
from sessionstore._tokens import content_tokens, message_tokens
from sessionstore.errors import ConfigurationError, MissingDependencyError
from sessionstore.formats._text import render_as_text

# ── strategies ─────────────────────────────────────────────────────────────────

texts = st.text(max_size=40)
names = st.text(min_size=1, max_size=12)
text_blocks = st.builds(TextContent, text=texts)
thinking_blocks = st.builds(ThinkingContent, thinking=texts)
tool_calls = st.builds(ToolCall, id=st.just("c1"), name=names, arguments=texts)
# Sizes on both sides of the 85-token floor (63,750 bytes), and a URL image (0 bytes).
image_blocks = st.one_of(
    st.builds(ImageContent, url=st.just("https://example.org/cat.png")),
    st.integers(0, 750 * 120).map(
        lambda size: ImageContent(data=base64.b64encode(b"\x00" * size).decode())
    ),
)
user_blocks = st.lists(st.one_of(text_blocks, image_blocks), max_size=4)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
messages: st.SearchStrategy[Message] = st.one_of(
    st.builds(UserMessage, content=user_blocks),
    st.builds(
        AssistantMessage,
        content=st.lists(
            st.one_of(text_blocks, thinking_blocks, tool_calls, image_blocks), max_size=5
        ),
    ),
    st.builds(SystemMessage, content=st.lists(text_blocks, max_size=3)),
    st.builds(
        ToolResultMessage,
        tool_call_id=st.just("c1"),
        tool_name=st.text(max_size=12),
        content=user_blocks,
    ),
    st.builds(CustomMessage, custom_type=names, data=json_values),
    st.builds(BashExecutionMessage, command=texts, output=texts),
    st.builds(BranchSummaryMessage, summary=texts),
    st.builds(CompactionSummaryMessage, summary=texts),
)


def _image_tokens(image: ImageContent) -> int:
    size = len(base64.b64decode(image.data)) if image.data is not None else 0
    return min(max(size // 750, 85), 16_000)


def _parts(message: Message) -> tuple[list[str], int]:
    """The texts a message is counted from, and what it adds besides them (framing, images)."""
    if isinstance(message, UserMessage | AssistantMessage | SystemMessage | ToolResultMessage):
        found: list[str] = []
        fixed = 4
        if isinstance(message, ToolResultMessage):
            found.append(message.tool_name)
            fixed = 8
        for block in message.content:
            if isinstance(block, TextContent):
                found.append(block.text)
            elif isinstance(block, ThinkingContent):
                found.append(block.thinking)
            elif isinstance(block, ToolCall):
                found += [block.name, block.arguments]
                fixed += 8
            else:
                fixed += _image_tokens(block)
        return found, fixed
    # The kinds without a provider role are counted as the text they are sent as.
    rendered = render_as_text(message)
    return ([], 0) if rendered is None else ([rendered], 4)


def _utf8_bytes(text: str) -> int:
    return len(text.encode())


# ── the seed heuristic ─────────────────────────────────────────────────────────


def test_estimate_tokens_is_ceil_of_utf8_bytes_over_four() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("é") == 1  # two bytes
    assert estimate_tokens("日本語") == 3  # nine bytes


@given(st.text(max_size=200))
def test_estimate_tokens_counts_utf8_bytes_for_any_text(text: str) -> None:
    """ASCII texts are counted by length (no encode), any other text by its UTF-8 bytes."""
    assert estimate_tokens(text) == math.ceil(len(text.encode("utf-8")) / 4)


def test_message_tokens_follow_the_seed() -> None:
    user = UserMessage(content="abcdefgh")  # 2 + framing 4
    assert message_tokens(user) == 6
    call = ToolCall(id="c", name="bash", arguments='{"x": 1}')  # 1 + 2 + 8
    assistant = AssistantMessage(
        content=[TextContent(text="ab"), ThinkingContent(thinking="abcdefghi"), call]
    )
    assert message_tokens(assistant) == 1 + 3 + 11 + 4
    result = ToolResultMessage(tool_call_id="c", tool_name="bash", content="abcd")  # 1 + 1 + 8
    assert message_tokens(result) == 10
    custom = CustomMessage(custom_type="t", data={"a": 1})  # sent as '[t]\n{\n  "a": 1\n}'
    assert message_tokens(custom) == 4 + 4  # 16 bytes -> 4, + framing
    hidden = CustomMessage(custom_type="t", data={"a": 1}, display=False)
    assert message_tokens(hidden) == 0  # not sent, not counted


def test_image_tokens_are_clamped() -> None:
    small = ImageContent(data=base64.b64encode(b"x" * 100).decode())
    mid = ImageContent(data=base64.b64encode(b"x" * 750 * 200).decode())
    huge = ImageContent(data=base64.b64encode(b"x" * 750 * 20_000).decode())
    url = ImageContent(url="https://example.org/x.png")
    tokens = [message_tokens(UserMessage(content=[i])) - 4 for i in (small, mid, huge, url)]
    assert tokens == [85, 200, 16_000, 85]


def test_heuristic_counter_implements_the_protocol() -> None:
    counter = HeuristicTokenCounter()
    assert isinstance(counter, TokenCounter)
    assert counter.count_text("abcdefgh") == 2
    assert counter.count_message(UserMessage(content="abcd")) == 5


# ── the text-counting function of message_tokens ──────────────────────────────


@settings(max_examples=200)
@given(message=messages)
def test_message_tokens_is_the_sum_over_parts_for_any_text_counter(message: Message) -> None:
    found, fixed = _parts(message)
    assert message_tokens(message) == sum(map(estimate_tokens, found)) + fixed
    assert message_tokens(message, _utf8_bytes) == sum(map(_utf8_bytes, found)) + fixed


def test_content_tokens_counts_text_with_the_given_function_and_images_by_size() -> None:
    image = ImageContent(data=base64.b64encode(b"x" * 750 * 100).decode())
    blocks: list[TextContent | ImageContent | ToolCall] = [
        TextContent(text="abcdefgh"),
        image,
        ToolCall(id="c", name="ab", arguments="{}"),
    ]
    assert content_tokens(blocks) == 2 + 100 + (1 + 1 + 8)
    assert content_tokens(blocks, len) == 8 + 100 + (2 + 2 + 8)


# ── TiktokenCounter ────────────────────────────────────────────────────────────

PAT_STR = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\w+| ?\d+| ?[^\s\w]+|\s+"""


@pytest.fixture(scope="module")
def toy_encoding() -> Any:
    """A local byte-level BPE with a few merges: tiktoken cannot download encodings here."""
    tiktoken = pytest.importorskip("tiktoken")
    ranks = {bytes([i]): i for i in range(256)}
    for merged in (b"th", b"the", b" the", b"in", b"ing"):
        ranks[merged] = len(ranks)
    return tiktoken.Encoding(
        name="toy", pat_str=PAT_STR, mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 300}
    )


@pytest.fixture(scope="module")
def tiktoken_counter(toy_encoding: Any) -> TiktokenCounter:
    return TiktokenCounter(toy_encoding)


def test_tiktoken_counter_counts_merged_tokens(tiktoken_counter: TiktokenCounter) -> None:
    assert tiktoken_counter.count_text("") == 0
    assert tiktoken_counter.count_text("the") == 1
    assert tiktoken_counter.count_text("the the") == 2
    assert tiktoken_counter.count_text("the thing") == 4  # "the", " ", "th", "ing"
    assert tiktoken_counter.count_text("héllo") == 6  # bytes where nothing merges


def test_tiktoken_counter_counts_special_token_text_as_plain_text(
    tiktoken_counter: TiktokenCounter,
) -> None:
    assert tiktoken_counter.count_text("<|endoftext|>") == len("<|endoftext|>")


@settings(max_examples=200)
@given(text=st.text(max_size=200))
def test_tiktoken_counter_matches_encode(toy_encoding: Any, text: str) -> None:
    counter = TiktokenCounter(toy_encoding)
    assert counter.count_text(text) == len(toy_encoding.encode(text, disallowed_special=()))


@settings(max_examples=200)
@given(message=messages)
def test_tiktoken_message_count_is_the_sum_over_parts(toy_encoding: Any, message: Message) -> None:
    counter = TiktokenCounter(toy_encoding)
    found, fixed = _parts(message)
    assert counter.count_message(message) == sum(map(counter.count_text, found)) + fixed


def test_tiktoken_counter_keeps_the_heuristic_framing_and_image_clamp(
    tiktoken_counter: TiktokenCounter,
) -> None:
    huge = ImageContent(data=base64.b64encode(b"x" * 750 * 20_000).decode())
    assert tiktoken_counter.count_message(UserMessage(content=[huge])) == 16_000 + 4
    call = ToolCall(id="c", name="the", arguments="the")
    assert tiktoken_counter.count_message(AssistantMessage(content=[call])) == 1 + 1 + 8 + 4
    result = ToolResultMessage(tool_call_id="c", tool_name="the", content="the the")
    assert tiktoken_counter.count_message(result) == 2 + 1 + 8
    custom = CustomMessage(custom_type="t", data=["the"])  # sent as its rendered text
    rendered = render_as_text(custom)
    assert rendered == '[t]\n[\n  "the"\n]'
    assert tiktoken_counter.count_message(custom) == tiktoken_counter.count_text(rendered) + 4


def test_tiktoken_counter_is_a_token_counter(
    tiktoken_counter: TiktokenCounter, toy_encoding: Any
) -> None:
    assert isinstance(tiktoken_counter, TokenCounter)
    assert tiktoken_counter.encoding is toy_encoding
    assert repr(tiktoken_counter) == "TiktokenCounter('toy')"


def test_tiktoken_counter_loads_an_encoding_by_name(
    toy_encoding: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tiktoken.registry

    # Registered in tiktoken's own cache, so no download is attempted.
    monkeypatch.setitem(tiktoken.registry.ENCODINGS, "toy-by-name", toy_encoding)
    assert TiktokenCounter("toy-by-name").encoding is toy_encoding


def test_tiktoken_counter_refuses_an_encoding_it_cannot_load() -> None:
    pytest.importorskip("tiktoken")
    with pytest.raises(ConfigurationError, match="TIKTOKEN_CACHE_DIR") as info:
        TiktokenCounter("no-such-encoding")
    message = str(info.value)
    assert "'no-such-encoding'" in message
    assert "tiktoken.Encoding" in message
    assert isinstance(info.value.__cause__, ValueError)


def test_tiktoken_counter_refuses_other_encoding_types() -> None:
    pytest.importorskip("tiktoken")
    with pytest.raises(TypeError, match="not dict"):
        TiktokenCounter({"name": "o200k_base"})  # type: ignore[arg-type]  # the wrong type is the point


def test_tiktoken_counter_names_the_extra_when_tiktoken_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # makes `import tiktoken` fail
    with pytest.raises(
        MissingDependencyError, match=r'pip install "sessionstore\[tiktoken\]"'
    ) as info:
        TiktokenCounter()
    assert isinstance(info.value, ImportError)
    assert isinstance(info.value.__cause__, ImportError)


# ── CalibratedTokenCounter ─────────────────────────────────────────────────────


def _user(size: int) -> UserMessage:
    return UserMessage(content="x" * size)  # ceil(size / 4) + 4 heuristic tokens


def test_calibrated_counter_starts_at_the_base_counts() -> None:
    counter = CalibratedTokenCounter()
    assert (counter.factor, counter.samples) == (1.0, 0)
    assert isinstance(counter.base, HeuristicTokenCounter)
    assert isinstance(counter, TokenCounter)
    assert counter.count_text("abcdefgh") == 2
    assert counter.count_message(_user(8)) == 6
    assert counter.scale(123) == 123


def test_calibrated_counter_first_sample_sets_the_factor() -> None:
    counter = CalibratedTokenCounter()
    assert counter.record_usage(130, [_user(400)]) == 1.25  # 130 / 104
    assert (counter.factor, counter.samples) == (1.25, 1)
    assert counter.count_text("x" * 400) == 125
    assert counter.count_message(_user(400)) == 130
    assert counter.scale(7) == 9  # ceil(8.75)


def test_calibrated_counter_smooths_later_samples() -> None:
    counter = CalibratedTokenCounter(smoothing=0.5)
    counter.record_usage(200, [_user(384)])  # 200 / 100 = 2.0
    assert counter.record_usage(100, [_user(384)]) == 1.5  # 2.0 + 0.5 * (1.0 - 2.0)
    assert counter.record_usage(300, [_user(384)]) == 2.25  # 1.5 + 0.5 * (3.0 - 1.5)
    assert counter.samples == 3


def test_calibrated_counter_adds_the_system_prompt_to_the_estimate() -> None:
    counter = CalibratedTokenCounter()
    assert counter.record_usage(300, [_user(384)], system_prompt_tokens=50) == 2.0  # 300 / 150


def test_calibrated_counter_clamps_the_factor() -> None:
    counter = CalibratedTokenCounter(min_factor=0.5, max_factor=2.0, smoothing=1.0)
    assert counter.record_usage(10_000, [_user(384)]) == 2.0
    assert counter.record_usage(1, [_user(384)]) == 0.5
    default = CalibratedTokenCounter()
    assert default.record_estimate(1_000, 1) == 4.0
    assert CalibratedTokenCounter(min_factor=1.5, max_factor=3).factor == 1.5


def test_calibrated_counter_scales_without_float_noise() -> None:
    counter = CalibratedTokenCounter()
    counter.record_estimate(7, 3)  # 27 * (7 / 3) is 63.00000000000001 in floats
    assert counter.scale(27) == 63
    assert counter.scale(28) == 66  # ceil(65.33)
    assert counter.scale(0) == 0


@given(
    tokens=st.integers(0, 10**7),
    prompt=st.integers(1, 10**6),
    estimate=st.integers(1, 10**6),
)
def test_calibrated_scale_is_the_ceiling_of_the_product(
    tokens: int, prompt: int, estimate: int
) -> None:
    counter = CalibratedTokenCounter(min_factor=1e-6, max_factor=1e6)
    factor = counter.record_estimate(prompt, estimate)
    scaled = counter.scale(tokens)
    assert tokens * factor - 1e-5 <= scaled < tokens * factor + 1


def test_calibrated_counter_scales_another_base(tiktoken_counter: TiktokenCounter) -> None:
    counter = CalibratedTokenCounter(tiktoken_counter)
    assert counter.record_usage(21, [UserMessage(content="the the the")]) == 3.0  # 21 / (3 + 4)
    assert counter.count_text("the") == 3
    assert counter.count_message(UserMessage(content="the the")) == 18  # (2 + 4) * 3


@settings(max_examples=200)
@given(
    k0=st.floats(0.3, 3.5),
    k=st.floats(0.3, 3.5),
    smoothing=st.floats(0.05, 1.0),
    sizes=st.lists(st.integers(400, 40_000), min_size=2, max_size=40),
)
def test_calibrated_factor_converges_to_the_true_ratio(
    k0: float, k: float, smoothing: float, sizes: list[int]
) -> None:
    """Usage that is k times the estimate pulls the factor to k, geometrically."""
    counter = CalibratedTokenCounter(smoothing=smoothing)
    base = HeuristicTokenCounter()
    first, *rest = [[_user(size)] for size in sizes]
    estimate = base.count_message(first[0])
    counter.record_usage(round(k0 * estimate), first)
    start_error = abs(counter.factor - k)
    for batch in rest:
        counter.record_usage(round(k * base.count_message(batch[0])), batch)
    # Each sample's ratio is within 0.5 / estimate of k (integer usage); estimates are >= 104.
    rounding = 0.5 / 104
    bound = (1 - smoothing) ** len(rest) * start_error + rounding + 1e-9
    assert abs(counter.factor - k) <= bound
    assert counter.samples == len(sizes)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"smoothing": 0.0}, "smoothing"),
        ({"smoothing": -0.1}, "smoothing"),
        ({"smoothing": 1.5}, "smoothing"),
        ({"smoothing": math.nan}, "smoothing"),
        ({"min_factor": 2.0, "max_factor": 1.0}, "min_factor"),
        ({"min_factor": 0.0}, "min_factor"),
        ({"max_factor": math.inf}, "finite"),
    ],
)
def test_calibrated_counter_refuses_bad_settings(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CalibratedTokenCounter(**kwargs)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda c: c.record_usage(0, [_user(4)]), "prompt_tokens must be positive"),
        (lambda c: c.record_usage(-5, [_user(4)]), "prompt_tokens must be positive"),
        (lambda c: c.record_usage(10, []), "got none"),
        (lambda c: c.record_usage(10, [_user(4)], system_prompt_tokens=-1), "system_prompt"),
        (lambda c: c.record_estimate(10, 0), "estimated prompt must be positive"),
        (lambda c: c.scale(-1), "must not be negative"),
    ],
)
def test_calibrated_counter_refuses_bad_input(
    call: Callable[[CalibratedTokenCounter], object], match: str
) -> None:
    counter = CalibratedTokenCounter()
    with pytest.raises(ValueError, match=match):
        call(counter)
    assert (counter.factor, counter.samples) == (1.0, 0)


# ── reprs, doctests and bad input ─────────────────────────────────────────────


def test_reprs_show_the_state() -> None:
    counter = CalibratedTokenCounter()
    counter.record_estimate(3, 2)
    assert repr(counter) == "CalibratedTokenCounter(HeuristicTokenCounter(), factor=1.5, samples=1)"


def test_docstring_examples_run() -> None:
    results = [doctest.testmod(m) for m in (sessionstore._tokens, sessionstore._tracker)]
    assert [r.failed for r in results] == [0, 0]
    assert sum(r.attempted for r in results) >= 10


def test_message_tokens_refuses_what_is_not_a_message() -> None:
    with pytest.raises(TypeError, match="not a message: TextContent"):
        message_tokens(TextContent(text="x"))  # type: ignore[arg-type]  # the wrong type is the point
