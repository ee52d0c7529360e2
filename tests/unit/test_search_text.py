"""What search indexes, how a query is read, and how a snippet is cut (pure, no database)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessionstore import (
    AssistantMessage,
    BashExecutionMessage,
    BranchSummaryMessage,
    CompactionSummaryMessage,
    CustomMessage,
    ImageContent,
    SystemMessage,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from sessionstore._search_text import (
    MAX_SEARCH_TEXT,
    MAX_TERMS,
    SEPARATORS,
    indexed_text,
    query_terms,
    searchable_text,
    snippet,
)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (UserMessage(content=[TextContent(text="hi"), ImageContent(url="http://x/i.png")]), "hi"),
        (SystemMessage(content="be brief"), "be brief"),
        (
            AssistantMessage(
                content=[
                    ThinkingContent(thinking="hidden"),
                    TextContent(text="reading"),
                    ToolCall(id="c", name="read_file", arguments='{"path": "a.py"}'),
                ]
            ),
            'reading\nread_file {"path": "a.py"}',
        ),
        (ToolResultMessage(tool_call_id="c", tool_name="ls", content="a.py"), "ls\na.py"),
        (ToolResultMessage(tool_call_id="c", content="out"), "out"),
        (BashExecutionMessage(command="make", output="ok"), "make\nok"),
        (BranchSummaryMessage(summary="left branch"), "left branch"),
        (CompactionSummaryMessage(summary="earlier"), "earlier"),
        (CustomMessage(custom_type="note", data="plain"), "note\nplain"),
        (CustomMessage(custom_type="note", data={"k": "é"}), 'note\n{"k": "é"}'),
        (CustomMessage(custom_type="note"), "note"),
    ],
)
def test_searchable_text_of_each_kind(message, expected):
    assert searchable_text(message) == expected


def test_searchable_text_is_capped_and_has_no_nul():
    long = searchable_text(UserMessage(content="a\x00b" + "x" * (2 * MAX_SEARCH_TEXT)))
    assert len(long) == MAX_SEARCH_TEXT
    assert long.startswith("a b")


def test_indexed_text_is_the_searchable_words_spaced():
    message = ToolResultMessage(tool_call_id="c", tool_name="read_file", content="src/a.py: ok…")
    assert indexed_text(message) == "read file src a py ok"
    assert indexed_text(UserMessage(content="Ünïcode — 3.14 café")) == "Ünïcode 3 14 café"


@given(st.text(alphabet=st.characters(max_codepoint=0x7F)))
def test_indexed_text_of_an_ascii_text_is_the_separators_split(text):
    # The byte translation of ASCII texts gives what the pattern gives.
    expected = SEPARATORS.sub(" ", text.replace("\x00", " ")).strip()
    assert indexed_text(UserMessage(content=text)) == expected


def test_query_terms_drop_punctuation_and_repeats_and_keep_case_for_the_database():
    assert query_terms('  "Read_File" AND read-file* NEAR(  ') == ["Read", "File", "AND", "NEAR"]
    assert query_terms('"') == []
    assert query_terms("…") == []
    assert query_terms("café") == ["café"]
    assert len(query_terms(" ".join(f"w{i}" for i in range(100)))) == MAX_TERMS
    with pytest.raises(ValueError, match="empty"):
        query_terms(" \n ")


def test_snippet_marks_whole_words_around_the_densest_match():
    text = "alpha " * 60 + "the needle is here " + "beta " * 60 + "needle and thread"
    cut = snippet(text, ["needle", "thread"], width=40)
    assert cut.startswith("…")
    assert cut.endswith("…") is False
    assert "**needle** and **thread**" in cut
    assert snippet("needles and a needle", ["needle"]) == "needles and a **needle**"
    assert snippet("no match at all", ["zzz"]) == "no match at all"
    assert snippet("read_file ran", ["file"]) == "read_**file** ran"
    assert snippet("x " * 200, []).endswith("…")
