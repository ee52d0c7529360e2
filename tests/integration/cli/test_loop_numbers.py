"""Loops are numbered 1, 2, ... within their session in every output, and `--loop N` takes
that number (issue 19): a second `demo` in the same file once labelled its loops 13-24.

Loop ids stay unique in the database (the store API's); the CLI shows `LoopRecord.number`.
"""

from __future__ import annotations

import re

from sessionstore import LoopRecord, audit_session
from tests.integration.cli.runner import fails, json_out, ok, with_store


def _loops(url: str, session_id: str) -> list[LoopRecord]:
    return with_store(url, lambda s: s.list_loops(session_id))


def _two_demos(url: str, loops: int) -> tuple[str, str]:
    first = json_out(ok(url, "demo", "--loops", str(loops), "--json"))
    second = json_out(ok(url, "demo", "--loops", str(loops), "--seed", "2", "--json"))
    return first["session_id"], second["session_id"]


def _loop_column(text: str) -> list[int]:
    """The numbers in the first column of the loop table of `sessions show`."""
    rows = [re.match(r"│\s+(\d+)\s+│", line) for line in text.splitlines()]
    return [int(row.group(1)) for row in rows if row]


def test_a_second_demo_in_the_same_file_shows_loops_1_to_12(tmp_path):
    url = f"sqlite+aiosqlite:///{tmp_path / 'demo.db'}"
    ok(url, "demo")
    text = ok(url, "demo", "--seed", "2", env={"COLUMNS": "160"}).stdout
    first, second = (s.id for s in with_store(url, lambda s: s.list_sessions()).items[::-1])

    assert _loops(url, second)[0].id == 13  # ids go on from the first session's
    assert "2. Compacted the current loop (12) and the" in text
    assert "4. Audit of loop 12: raw turns" in text
    for session_id in (first, second):
        shown = ok(url, "sessions", "show", session_id, env={"COLUMNS": "160"}).stdout
        assert _loop_column(shown)[:12] == list(range(1, 13))
        assert re.search(r"Active loop\s+12\b", shown)
        data = json_out(ok(url, "sessions", "show", session_id, "--json"))
        assert [loop["number"] for loop in data["loops"]] == list(range(1, 13))


def test_loop_n_addresses_the_nth_loop_of_that_session(db_url):
    first, second = _two_demos(db_url, 4)
    loops = _loops(db_url, second)
    third = loops[2]
    assert third.number == 3
    assert third.id != 3  # the number is not the id: the first demo took ids 1-4

    audited = json_out(ok(db_url, "audit", second, "--loop", "3", "--json"))
    assert [loop["loop_id"] for loop in audited["loops"]] == [loop.id for loop in loops[:3]]
    assert [loop["loop_number"] for loop in audited["loops"]] == [1, 2, 3]
    expected = with_store(db_url, lambda s: audit_session(s, second, loop_id=third.id))
    assert audited["raw_tokens"] == expected.raw_tokens

    built = json_out(ok(db_url, "context", second, "--loop", "3", "--budget", "50000", "--json"))
    assert built["loop_ids"][-1] == third.id
    assert built["loop_numbers"][-1] == 3
    text = ok(db_url, "context", second, "--loop", "3", "--budget", "50000").stdout
    assert re.search(r"loops in scope: (\d+, )*3\n", text)
    assert f"loop {third.id} " not in text.replace("loop 3 ", "")

    exported = json_out(ok(db_url, "export", second, "--loop", "2"))
    first_two = with_store(db_url, lambda s: s.get_history(second, loop_id=loops[1].id))
    assert len(exported["messages"]) == len(first_two)

    compacted = json_out(ok(db_url, "compact", second, "--loop", "3", "--json"))
    assert compacted["loop_ids"][-1] == third.id
    assert compacted["loop_numbers"][-1] == 3
    table = ok(db_url, "compact", second, "--loop", "2", env={"COLUMNS": "160"}).stdout
    assert re.search(r"Loops in scope (\d+, )*2: ", table)

    result = fails(db_url, "audit", second, "--loop", "5")
    assert f"loop 5 not found in session '{second}'" in result.stderr
    # The first session's numbers address its own loops.
    mine = json_out(ok(db_url, "audit", first, "--loop", "3", "--json"))
    assert mine["loops"][-1]["loop_id"] == _loops(db_url, first)[2].id


def test_search_and_audit_name_loops_by_their_number(db_url):
    _, second = _two_demos(db_url, 3)
    numbers = {loop.id: loop.number for loop in _loops(db_url, second)}

    hits = json_out(ok(db_url, "search", "the", "--session", second, "--json"))
    assert hits
    assert all(hit["loop_number"] == numbers[hit["loop_id"]] for hit in hits)
    text = ok(db_url, "search", "the", "--session", second).stdout
    shown = {int(n) for n in re.findall(rf"{second}  loop (\d+)  ", text)}
    assert shown
    assert shown <= {1, 2, 3}

    audit = ok(db_url, "audit", second, env={"COLUMNS": "160"}).stdout
    rows = [re.match(r"│\s+(\d+)(\*?)\s+│", line) for line in audit.splitlines()]
    assert {int(row.group(1)) for row in rows if row} == {1, 2, 3}
