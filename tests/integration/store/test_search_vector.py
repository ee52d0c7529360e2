"""PostgreSQL: the search vector the append writes is the one `to_tsvector` gives (0012).

The append builds an ASCII text's vector in Python (`_search_vector`); the query side is
still `plainto_tsquery('simple', ...)`, and the rows written before migration 0012 hold
`to_tsvector('simple', indexed_text)`. Both agree with the literal only if it is that
same vector, which these tests compare on the server.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from sessionstore import SessionStore, ToolResultMessage, UserMessage, make_engine
from sessionstore._search_text import index_words, searchable_text
from sessionstore.models import MESSAGE_ADAPTER
from sessionstore.store._search_vector import ascii_vector, vector_values
from tests.conftest import BACKENDS

POSTGRES = [param for param in BACKENDS if param.id == "postgres"]

_SAME = text(
    "SELECT CAST(CAST(:vector AS tsvector) AS TEXT), CAST(to_tsvector('simple', :words) AS TEXT)"
)

# Pieces that make the default parser's odd cases: numbers in scientific notation running
# into letters, signs and dots, case, separators, and long words.
_PIECES = st.sampled_from(
    ["a", "Z", "e", "E", "x", "0", "1", "9", "12", " ", "  ", "-", "+", ".", "_", ",", "\n"]
)


async def _server_pair(db_url: str, vector: str, words: str) -> tuple[str, str]:
    engine = make_engine(db_url)
    try:
        async with engine.connect() as conn:
            row = (await conn.execute(_SAME, {"vector": vector, "words": words})).one()
    finally:
        await engine.dispose()
    return row[0], row[1]


@pytest.mark.parametrize("db_url", POSTGRES, indirect=True)
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(searchable=st.lists(_PIECES, max_size=40).map("".join))
@example(searchable="3e4x 1E5 1e5e5 12e 0x1f 007 1e+5 Ab1E2 e5")
@example(searchable="w " * 300 + "z")  # a lexeme keeps 255 positions
@example(searchable=" ".join(["q"] * 17_000 + ["end"]))  # positions stop at 16,383
@example(searchable="x" * 2047 + " a " + "y" * 2048 + " b")  # 2,048 bytes: not indexed
async def test_the_literal_is_the_vector_to_tsvector_gives(db_url: str, searchable: str) -> None:
    written, generated = await _server_pair(
        db_url, ascii_vector(searchable), index_words(searchable)
    )
    assert written == generated


async def _stored_vectors(db_url: str) -> list[tuple[int, str, str]]:
    """Each message's stored vector and the one `to_tsvector` gives for its indexed text."""
    engine = make_engine(db_url)
    try:
        async with engine.connect() as conn:
            rows = (
                await conn.execute(
                    text(
                        "SELECT id, CAST(search_vector AS TEXT), CAST(payload AS TEXT) "
                        "FROM sessionstore_messages ORDER BY id"
                    )
                )
            ).all()
            out = []
            for message_id, vector, payload in rows:
                words = index_words(searchable_text(MESSAGE_ADAPTER.validate_json(payload)))
                expected = (
                    await conn.execute(
                        text("SELECT CAST(to_tsvector('simple', :w) AS TEXT)"), {"w": words}
                    )
                ).scalar_one()
                out.append((message_id, vector, expected))
    finally:
        await engine.dispose()
    return out


@pytest.mark.parametrize("db_url", POSTGRES, indirect=True)
async def test_appends_write_the_vector_and_search_finds_them_at_once(
    store: SessionStore, db_url: str
) -> None:
    """ASCII texts (a literal) and others (`to_tsvector` on the server), one by one and in
    a batch: each is found right after its append, with the same vector as before 0012."""
    session = await store.create_session(app_name="a", user_id="u")
    one = await store.append_messages(session.id, [UserMessage(content="Run 3e4x now")])
    assert [h.message_id for h in await store.search("3e4x")] == [one[0].id]
    batch = await store.append_messages(
        session.id,
        [
            UserMessage(content="Die Straße zur ÉCOLE, naïve"),
            ToolResultMessage(tool_call_id="c", tool_name="grep", content="Привет мир"),
            UserMessage(content=""),
            UserMessage(content="plain ASCII: okapi"),
        ],
    )
    assert [h.message_id for h in await store.search("école")] == [batch[0].id]
    assert [h.message_id for h in await store.search("привет")] == [batch[1].id]
    assert [h.message_id for h in await store.search("grep OKAPI")] == []
    assert [h.message_id for h in await store.search("okapi")] == [batch[3].id]
    assert vector_values(batch[0].message)[0] is None  # the server's to_tsvector
    for _, stored, expected in await _stored_vectors(db_url):
        assert stored == expected


@pytest.mark.parametrize("db_url", POSTGRES, indirect=True)
async def test_ranking_counts_each_occurrence(store: SessionStore) -> None:
    """The literal has the positions `ts_rank` counts: more occurrences rank higher."""
    session = await store.create_session(app_name="a", user_id="u")
    once, thrice = await store.append_messages(
        session.id,
        [
            UserMessage(content="the wombat sleeps"),
            UserMessage(content="wombat, wombat and a wombat"),
        ],
    )
    hits = await store.search("wombat")
    assert [h.message_id for h in hits] == [thrice.id, once.id]
    assert hits[0].score > hits[1].score


@pytest.mark.parametrize("db_url", POSTGRES, indirect=True)
async def test_the_largest_text_is_appended_and_its_last_word_found(store: SessionStore) -> None:
    """100,000 characters of distinct words (past 16,383 positions) and a 3,000-letter word:
    the append does not fail, the word past the last position is found, the long one is not
    indexed (as `to_tsvector` skips it)."""
    session = await store.create_session(app_name="a", user_id="u")
    long_word = "z" * 3000
    text = " ".join([long_word, *(f"x{n:x}" for n in range(16_500))])
    assert 95_000 < len(text) <= 100_000
    (stored,) = await store.append_messages(session.id, [UserMessage(content=text)])
    assert [h.message_id for h in await store.search(f"x{16_499:x}")] == [stored.id]
    assert await store.search(long_word) == []
