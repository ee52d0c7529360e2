"""One hypothesis strategy for every message kind with every field, for the encoder tests.

`test_canonical_message` (the canonical bytes against the dump's) and `test_stored_json`
(the check-free decoder against `MESSAGE_ADAPTER`) draw from the same messages: every kind,
every block, every optional field, strings with every JSON escape and integers past 2**64.
"""

from __future__ import annotations

import base64

from hypothesis import strategies as st

from sessionstore import (
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
    Usage,
    UserMessage,
)

# Control characters, quotes, backslashes, line separators and non-ASCII: every escape.
_characters = st.characters(exclude_categories=["Cs"]) | st.sampled_from('"\\/\x00\x1f\x7f\u2028é')
texts = st.text(_characters, max_size=80)
names = st.text(_characters, min_size=1, max_size=40)
big_ints = st.integers(-(2**70), 2**70)
json_values = st.recursive(
    st.none() | st.booleans() | big_ints | st.floats(allow_nan=False, allow_infinity=False) | texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
    max_leaves=8,
)
extras = st.dictionaries(texts, json_values, max_size=3)
counts = st.integers(0, 2**40)
images = st.one_of(
    st.builds(ImageContent, url=texts, mime_type=st.none() | texts, detail=st.none() | texts),
    st.builds(
        ImageContent,
        data=st.binary(max_size=12).map(lambda b: base64.b64encode(b).decode()),
        mime_type=texts,
    ),
)
user_blocks = st.lists(st.builds(TextContent, text=texts) | images, max_size=3)
assistant_blocks = st.lists(
    st.one_of(
        st.builds(TextContent, text=texts),
        st.builds(
            ThinkingContent, thinking=texts, signature=st.none() | texts, redacted=st.booleans()
        ),
        st.builds(ToolCall, id=names, name=names, arguments=texts),
        images,
    ),
    max_size=4,
)
usages = st.builds(
    Usage,
    input_tokens=counts,
    output_tokens=counts,
    cache_read_tokens=counts,
    cache_write_tokens=counts,
    reasoning_tokens=counts,
)
messages: st.SearchStrategy[Message] = st.one_of(
    st.builds(UserMessage, content=user_blocks, name=st.none() | texts, extra=extras),
    st.builds(
        AssistantMessage,
        content=assistant_blocks,
        name=st.none() | texts,
        model=st.none() | texts,
        stop_reason=st.none() | texts,
        usage=st.none() | usages,
        extra=extras,
    ),
    st.builds(
        ToolResultMessage,
        tool_call_id=names,
        tool_name=texts,
        content=texts | user_blocks,
        is_error=st.booleans(),
        extra=extras,
    ),
    st.builds(
        BashExecutionMessage,
        command=texts,
        output=texts,
        exit_code=st.none() | big_ints,
        cancelled=st.booleans(),
        truncated=st.booleans(),
    ),
    st.builds(CustomMessage, custom_type=names, data=json_values, display=st.booleans()),
    st.builds(BranchSummaryMessage, summary=texts, from_loop_id=st.none() | st.integers(0)),
    st.builds(CompactionSummaryMessage, summary=texts, tokens_before=st.none() | st.integers(0)),
    st.builds(SystemMessage, content=st.lists(st.builds(TextContent, text=texts), max_size=2)),
)
