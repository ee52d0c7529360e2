"""The synthetic session generator: valid, reproducible, and shaped like real sessions."""

import doctest
import importlib
import os
import pkgutil
import statistics
import subprocess
import sys
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from sessionstore import (
    AssistantMessage,
    BashExecutionMessage,
    Message,
    ThinkingContent,
    ToolResultMessage,
    UserMessage,
)
from sessionstore import _demo as synthetic
from sessionstore._demo import generate_session, iter_session_messages
from sessionstore._tokens import message_tokens
from sessionstore._turns import TurnAssigner
from sessionstore.models import MESSAGE_ADAPTER

ARGUMENT_KEYS = {
    "read_file": {"path"},
    "grep": {"pattern", "path"},
    "list_dir": {"path"},
    "edit_file": {"path", "old_string", "new_string"},
    "run_tests": {"args"},
    "bash": {"command"},
}


def _dump(session: Sequence[Sequence[Message]]) -> list[list[dict[str, Any]]]:
    return [[message.model_dump(mode="json") for message in loop] for loop in session]


def _flat(session: Sequence[Sequence[Message]]) -> list[Message]:
    return [message for loop in session for message in loop]


def _check_calls_answered(loop: Sequence[Message], *, allow_dangling: bool = False) -> None:
    """Each call is answered exactly once, right after its assistant message, by name."""
    pending: dict[str, str] = {}
    for position, message in enumerate(loop):
        if isinstance(message, ToolResultMessage):
            assert message.tool_call_id in pending, f"orphan result at {position}"
            assert message.tool_name == pending.pop(message.tool_call_id)
            continue
        assert not pending, f"{message.kind} at {position} before calls {set(pending)} answered"
        if isinstance(message, AssistantMessage):
            pending = {call.id: call.name for call in message.tool_calls}
            assert len(pending) == len(message.tool_calls), "a call id repeats in one message"
    if not allow_dangling:
        assert not pending, f"calls {set(pending)} have no result"


def _check_loop(loop: Sequence[Message]) -> None:
    assert isinstance(loop[0], UserMessage)
    last = loop[-1]
    assert isinstance(last, AssistantMessage)
    assert not last.tool_calls
    assert last.text
    for message in loop[:-1]:
        if isinstance(message, AssistantMessage):
            assert 1 <= len(message.tool_calls) <= 3, "only the final answer makes no call"
    _check_calls_answered(loop)


@pytest.mark.parametrize("seed", [0, 1, 2, 41])
def test_loops_start_with_a_request_and_end_with_a_final_answer(seed):
    session = generate_session(seed=seed, loops=6)
    assert len(session) == 6
    for loop in session:
        _check_loop(loop)


@pytest.mark.parametrize("turns_per_loop", [0, 1, 5, (1, 1), (2, 60)])
def test_turns_per_loop_sets_the_tool_using_turns(turns_per_loop):
    session = generate_session(seed=4, loops=8, turns_per_loop=turns_per_loop)
    low, high = (
        (turns_per_loop, turns_per_loop) if isinstance(turns_per_loop, int) else turns_per_loop
    )
    for loop in session:
        _check_loop(loop)
        calling = [m for m in loop if isinstance(m, AssistantMessage) and m.tool_calls]
        assert low <= len(calling) <= high


def test_turns_are_spread_over_the_range():
    session = generate_session(seed=4, loops=60, turns_per_loop=(6, 40))
    counts = [
        sum(1 for m in loop if isinstance(m, AssistantMessage) and m.tool_calls) for loop in session
    ]
    assert min(counts) < 12
    assert max(counts) > 25


def test_each_result_joins_the_turn_of_its_call():
    """The store's own turn assignment puts every result in its call's turn."""
    for loop in generate_session(seed=8, loops=5):
        assigner = TurnAssigner()
        turns = [assigner.assign(message) for message in loop]
        call_turn: dict[str, int] = {}
        for message, turn in zip(loop, turns, strict=True):
            if isinstance(message, AssistantMessage):
                call_turn.update((call.id, turn) for call in message.tool_calls)
            if isinstance(message, ToolResultMessage):
                assert call_turn[message.tool_call_id] == turn


def test_call_ids_are_unique_in_a_session():
    ids = [
        call.id
        for message in _flat(generate_session(seed=9, loops=20))
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
    ]
    assert len(ids) == len(set(ids))


def test_same_seed_gives_the_same_session():
    first = generate_session(seed=11, loops=5, interrupted_last_call=True)
    second = generate_session(seed=11, loops=5, interrupted_last_call=True)
    assert _dump(first) == _dump(second)


def test_same_seed_gives_the_same_session_in_another_process():
    """Nothing depends on the process, such as the order of a set of strings.

    The project's lookup tables are compared too: a session of a few loops draws from
    them too rarely to show a changed order. Hash seeds 0 and 4 do order the project's
    identifiers differently when they are kept in set order.
    """
    script = (
        "import hashlib, json\n"
        "from sessionstore import _demo as synthetic\n"
        "session = synthetic.generate_session(seed=12, loops=4)\n"
        "data = [[m.model_dump(mode='json') for m in loop] for loop in session]\n"
        "project = synthetic._project(12)\n"
        "data.append([project.words, project.directories, list(project.listing.items())])\n"
        "print(hashlib.sha256(json.dumps(data).encode()).hexdigest())\n"
    )
    digests = set()
    for hash_seed in ("0", "4"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        result = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
        )
        digests.add(result.stdout.strip())
    assert len(digests) == 1


def test_different_seeds_give_different_sessions():
    first = _dump(generate_session(seed=1, loops=3))
    second = _dump(generate_session(seed=2, loops=3))
    assert first != second
    assert first[0][0] != second[0][0] or first[0][1] != second[0][1]


def test_earlier_loops_do_not_depend_on_how_many_follow():
    short = generate_session(seed=13, loops=3)
    long = generate_session(seed=13, loops=7)
    assert _dump(short) == _dump(long[:3])


def test_interrupted_last_call_leaves_exactly_one_call_without_result():
    session = generate_session(seed=14, loops=4, interrupted_last_call=True)
    for loop in session[:-1]:
        _check_loop(loop)
    last = session[-1]
    assert isinstance(last[0], UserMessage)
    final = last[-1]
    assert isinstance(final, AssistantMessage)
    assert len(final.tool_calls) == 1
    _check_calls_answered(last[:-1])
    answered = {m.tool_call_id for m in _flat(session) if isinstance(m, ToolResultMessage)}
    calls = [
        call.id for m in _flat(session) if isinstance(m, AssistantMessage) for call in m.tool_calls
    ]
    assert [call for call in calls if call not in answered] == [final.tool_calls[0].id]


def test_interrupted_last_call_works_with_no_turns():
    [loop] = generate_session(seed=15, loops=1, turns_per_loop=0, interrupted_last_call=True)
    assert [m.kind for m in loop] == ["user", "assistant"]
    assert isinstance(loop[1], AssistantMessage)
    assert len(loop[1].tool_calls) == 1


@pytest.mark.parametrize("total", [2, 3, 4, 5, 7, 57, 1_000, 4_321])
def test_iter_session_messages_ends_exactly_at_the_total(total):
    loops = list(iter_session_messages(seed=16, total_messages=total))
    assert sum(len(loop) for loop in loops) == total
    for loop in loops:
        _check_loop(loop)


@pytest.mark.parametrize("turns_per_loop", [0, 1, (1, 3), (30, 40)])
def test_iter_session_messages_honours_the_total_for_any_loop_length(turns_per_loop):
    for total in range(2, 40):
        loops = list(
            iter_session_messages(seed=23, total_messages=total, turns_per_loop=turns_per_loop)
        )
        assert sum(len(loop) for loop in loops) == total
        for loop in loops:
            _check_loop(loop)


def test_iter_session_messages_gives_zero_messages_for_zero():
    assert list(iter_session_messages(total_messages=0)) == []


def test_iter_session_messages_repeats_generate_session_but_for_the_cut_last_loop():
    loops = list(iter_session_messages(seed=17, total_messages=3_000))
    whole = generate_session(seed=17, loops=len(loops))
    assert _dump(loops[:-1]) == _dump(whole[:-1])
    assert len(loops[-1]) <= len(whole[-1]) + 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"loops": -1},
        {"loops": 0, "interrupted_last_call": True},
        {"turns_per_loop": -1},
        {"turns_per_loop": (0, 5)},
        {"turns_per_loop": (9, 3)},
    ],
)
def test_generate_session_rejects_bad_arguments(kwargs):
    with pytest.raises(ValueError, match="loop"):
        generate_session(**kwargs)


@pytest.mark.parametrize("total", [-5, 1])
def test_iter_session_messages_rejects_an_impossible_total(total):
    with pytest.raises(ValueError, match="total_messages"):
        next(iter_session_messages(total_messages=total))


def test_messages_round_trip_through_json():
    for message in _flat(generate_session(seed=18, loops=6, interrupted_last_call=True)):
        assert MESSAGE_ADAPTER.validate_json(MESSAGE_ADAPTER.dump_json(message)) == message


def test_tool_arguments_are_json_objects_with_the_tool_s_keys():
    names: Counter[str] = Counter()
    for message in _flat(generate_session(seed=19, loops=10)):
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                arguments = call.parsed_arguments()
                assert isinstance(arguments, dict)
                assert ARGUMENT_KEYS[call.name] <= arguments.keys()
                names[call.name] += 1
    assert set(names) == set(ARGUMENT_KEYS)
    assert names.most_common(1)[0][0] in {"read_file", "edit_file", "run_tests"}


def test_token_sizes_are_those_of_real_coding_sessions():
    messages = _flat(generate_session(seed=20, loops=30))
    outputs = sorted(message_tokens(m) for m in messages if isinstance(m, ToolResultMessage))
    assert 50 <= statistics.median(outputs) <= 2_000
    # A heavy tail (whole files, long logs), but no single output is absurd.
    assert outputs[int(len(outputs) * 0.95)] >= 2_000
    assert outputs[-1] <= 30_000
    assert min(outputs) < 50
    assistant = [message_tokens(m) for m in messages if isinstance(m, AssistantMessage)]
    assert 20 <= statistics.median(assistant) <= 500
    per_message = sum(message_tokens(m) for m in messages) / len(messages)
    assert 150 <= per_message <= 1_000


def test_the_message_mix_is_that_of_real_coding_sessions():
    messages = _flat(generate_session(seed=21, loops=40))
    kinds = Counter(message.kind for message in messages)
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert 0.03 <= sum(m.is_error for m in results) / len(results) <= 0.2
    assert kinds["tool_result"] > kinds["assistant"] > 10 * kinds["user"] / 2
    assert kinds["user"] > 40, "follow-up messages mid-loop"
    assert kinds["bash_execution"] > 0
    assistant = [m for m in messages if isinstance(m, AssistantMessage)]
    thinking = sum(any(isinstance(b, ThinkingContent) for b in m.content) for m in assistant)
    assert 0.25 <= thinking / len(assistant) <= 0.65
    parallel = sum(len(m.tool_calls) > 1 for m in assistant)
    assert 0.1 <= parallel / len(assistant) <= 0.45
    bash = [m for m in messages if isinstance(m, BashExecutionMessage)]
    assert all(m.exit_code is not None or m.cancelled for m in bash)


def test_the_docstring_example_runs():
    """The package's modules, not only the package: the examples sit where the code is."""
    modules = [
        synthetic,
        *(
            importlib.import_module(f"{synthetic.__name__}.{info.name}")
            for info in pkgutil.iter_modules(synthetic.__path__)
        ),
    ]
    results = [doctest.testmod(module) for module in modules]
    assert sum(result.attempted for result in results) > 0
    assert sum(result.failed for result in results) == 0


def test_edits_change_what_they_replace():
    for message in _flat(generate_session(seed=22, loops=10)):
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                if call.name == "edit_file":
                    arguments = call.parsed_arguments()
                    assert arguments["old_string"] != arguments["new_string"]
