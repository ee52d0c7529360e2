"""The fitting order's pure parts: summaries re-fitted, the system prompt by sentences."""

from __future__ import annotations

import gc

import pytest

from sessionstore._fit_render import FitState, Renderer
from sessionstore._fit_units import group_units
from sessionstore._framing import SUMMARY_OPEN, SUMMARY_OPEN_TERSE, text_message
from sessionstore._items import ContextItem, LoopSource
from sessionstore._overlay import build
from sessionstore._tokens import estimate_tokens, message_tokens
from sessionstore._trim import fit_context, shorten_sentences, shorten_summary
from sessionstore.models import (
    AssistantMessage,
    CompactionSummaryMessage,
    Message,
    SessionDigest,
    SystemMessage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from tests.unit._loops import stored

POLICY = (
    "You are an airline agent. Help users book, change or cancel flights. Never book "
    "without the user's confirmation. Payment must use a stored method: a credit card, "
    "a gift card or a certificate.\nAnswer politely."
)


def test_a_system_prompt_is_cut_between_sentences_never_inside_one() -> None:
    whole = message_tokens(SystemMessage(content=POLICY))
    assert shorten_sentences(POLICY, whole) == POLICY
    for budget in range(1, whole):
        short = shorten_sentences(POLICY, budget)
        if not short:
            continue
        assert message_tokens(SystemMessage(content=short)) <= budget
        kept, note = short.split("\n[…")
        assert POLICY.startswith(kept)
        assert kept.endswith((".", ":")), kept
        assert "more sentence(s) left out" in note
    assert shorten_sentences(POLICY, 5) == ""


def test_a_handoff_is_refitted_by_priority_not_cut_at_its_end() -> None:
    handoff = (
        "## Active Task\nFix the parser crash on empty input.\n\n## Completed Actions\n"
        + "\n".join(f"{i}. RAN pytest -q tests/test_{i}.py - failed" for i in range(1, 60))
        + "\n\n## Critical Context\n- ticket: ABC-123"
    )
    for budget in (400, 120, 40):
        short = shorten_summary(handoff, budget)
        assert estimate_tokens(short) <= budget
        assert "## Active Task\nFix the parser crash" in short
    plain = "\n".join(f"[Summary] turn {i}: ran the tests" for i in range(200))
    short = shorten_summary(plain, 100)
    assert estimate_tokens(short) <= 100
    assert short.startswith("[Summary] turn 0")
    assert short.endswith("turn 199: ran the tests")


# ── the digest of the raw turns a build drops ─────────────────────────────────


def _turns(count: int) -> list[Message]:
    """A coding run: the task, then `count` test runs, each failing on its own error."""
    messages: list[Message] = [UserMessage(content="Fix the crash in src/parser.py")]
    for i in range(count):
        call = ToolCall(id=f"c{i}", name="bash", arguments={"command": f"pytest tests/t{i}.py"})
        lines = "\n".join(f"tests/t{i}.py::case_{j} collected from module {j}" for j in range(12))
        output = f"{lines}\nE   ValueError: bad token {i}\n1 failed in 0.{i}s\nExit code: 1"
        messages += [
            AssistantMessage(content=[call]),
            ToolResultMessage(tool_call_id=f"c{i}", content=output),
        ]
    return [*messages, UserMessage(content="go on")]


def _items(messages: list[Message]) -> list[ContextItem]:
    items = []
    for raw_id, message in enumerate(messages, start=1):
        pinned = raw_id == len(messages)
        tokens = message_tokens(message)
        items.append(
            ContextItem(message, tokens, "raw", 1, raw_id, covers=(raw_id,), pinned=pinned)
        )
    return items


def _digest(text: str) -> SessionDigest:
    message = CompactionSummaryMessage(summary=text, tokens_before=1_000)
    return SessionDigest(head_loop_id=1, through_loop_id=1, message=message, token_count=0)


def test_dropped_raw_turns_are_folded_into_a_digest_built_for_the_context() -> None:
    items = _items(_turns(12))
    fitted = fit_context(items, 900, task_loop_id=1)
    assert sum(item.tokens for item in fitted.items) <= 900
    assert fitted.trimmed > 0
    (built,) = [item for item in fitted.items if item.source == "built"]
    text = built.message.text  # type: ignore[union-attr]
    kept = {raw_id for item in fitted.items if item.source != "built" for raw_id in item.covers}
    dropped = {item.message_id for item in items} - kept
    # It names exactly the raw messages it stands for; the task is kept apart.
    assert set(built.covers) == dropped
    assert 1 not in built.covers
    # The dropped turns' errors, commands and files are in it.
    assert "ValueError: bad token" in text
    assert "pytest tests/t" in text
    assert "tests/t1.py" in text
    # Built the same way every time; never stored (a context item, no replacement id).
    assert fit_context(items, 900, task_loop_id=1) == fitted
    assert built.replacement_id is None


def test_dropped_turns_are_merged_into_the_session_digest_not_sent_beside_it() -> None:
    digest = _digest(
        "## Active Task\nFix the crash in src/parser.py\n\n## Critical Context\n- ticket: ABC-123"
    )
    items = _items(_turns(12))[1:]  # the task is folded into the digest already
    fitted = fit_context(items, 900, digest=digest)
    summaries = [item for item in fitted.items if item.source in ("digest", "built")]
    (built,) = summaries
    assert built.source == "built"
    text = built.message.text  # type: ignore[union-attr]
    assert text.count("## Active Task") == 1
    assert "ABC-123" in text  # the stored digest's facts carry over
    assert "ValueError: bad token" in text


def test_nothing_is_built_while_every_raw_turn_fits() -> None:
    items = _items(_turns(2))
    fitted = fit_context(items, 10_000, task_loop_id=1)
    assert [item.source for item in fitted.items] == ["raw"] * len(items)


# ── adjacent summaries merged when they must shorten ──────────────────────────


def _loop_summaries() -> list[ContextItem]:
    """Three loops of a support agent compacted one by one, then the latest request."""
    loops = [
        "## Active Task\nPlease look up my trips, I prefer only nonstop flights.\n\n"
        "## Completed Actions\n1. GOT user details (user_id=mia_li_3668) - ok"
        " [tool: get_user_details]\n\n## Critical Context\n- reservations: NO6JO3, AIXC49",
        "## Active Task\nWhat would the change cost?\n\n## Completed Actions\n"
        "1. CALCULATED expression=2 * 120 - ok [tool: calculate]\n\n## Active State\n"
        "- Last assistant note: The change costs $240 in total, paid with gift_card_7219486.",
        "## Active Task\nYes, go ahead.\n\n## Completed Actions\n1. UPDATED reservation"
        " flights (reservation_id=NO6JO3, payment_id=gift_card_7219486) - ok"
        " [tool: update_reservation_flights]\n\n## Active State\n"
        "- Last assistant note: Your reservation NO6JO3 now flies HAT041.",
    ]
    items = []
    for loop_id, text in enumerate(loops, start=2):
        message = CompactionSummaryMessage(summary=text, tokens_before=2_000)
        items.append(
            ContextItem(
                message, message_tokens(message), "compacted", loop_id, None, covers=(loop_id,)
            )
        )
    latest = UserMessage(content="Thanks, that is all.")
    items.append(
        ContextItem(latest, message_tokens(latest), "raw", 5, 99, covers=(99,), pinned=True)
    )
    return items


def test_summaries_that_must_shorten_are_sent_as_one_handoff() -> None:
    digest = _digest(
        "## Active Task\nI want to change my flight to Boston.\n\n"
        "## Critical Context\n- user_id: mia_li_3668"
    )
    items = _loop_summaries()
    roomy = fit_context(items, 2_000, digest=digest)
    assert [item.source for item in roomy.items].count("compacted") == 3  # one per loop
    whole = sum(item.tokens for item in roomy.items)
    # Where the first summary's terse framing is cut enough, every summary stays whole.
    terse = fit_context(items, whole * 3 // 4, digest=digest)
    assert [item.source for item in terse.items].count("compacted") == 3
    shown = "\n".join(getattr(item.message, "text", "") for item in terse.items)
    assert shown.startswith(SUMMARY_OPEN_TERSE)
    for item in items:
        message = item.message
        text = message.summary if isinstance(message, CompactionSummaryMessage) else message.text  # type: ignore[union-attr]
        assert text in shown
    for budget in (whole * 2 // 3, whole // 2):
        fitted = fit_context(items, budget, digest=digest)
        assert sum(item.tokens for item in fitted.items) <= budget
        (merged,) = [item for item in fitted.items if item.source != "raw"]
        text = merged.message.text  # type: ignore[union-attr]
        assert text.count("REFERENCE ONLY") == 1
        assert text.count("## Active Task") == 1
        assert set(merged.covers) == {2, 3, 4}
        # The newest request is the task, the first the goal; the records of every loop stay.
        assert "Yes, go ahead." in text
        assert "change my flight to Boston" in text
        for value in ("mia_li_3668", "NO6JO3", "gift_card_7219486"):
            assert value in text
    fitted = fit_context(items, whole * 2 // 3, digest=digest)
    text = fitted.items[0].message.text  # type: ignore[union-attr]
    # A replaced request's constraint and the older loop's note stay while there is room.
    assert "I prefer only nonstop flights." in text
    assert "Earlier assistant note: The change costs $240" in text
    assert "Last assistant note: Your reservation NO6JO3 now flies HAT041." in text
    # Each loop numbered its actions from 1: merged, they follow one another.
    assert "\n3. UPDATED reservation flights" in text


def test_summaries_with_dropped_turns_between_them_are_sent_as_one_handoff() -> None:
    """A short loop left raw between two compacted loops: dropped, it folds into one handoff."""
    first, second, third, latest = _loop_summaries()
    question = UserMessage(content="Can I also add a checked bag to NO6JO3?")
    answer = AssistantMessage(content="Yes: one checked bag is $35, paid with gift_card_7219486.")
    between = [
        ContextItem(message, message_tokens(message), "raw", 3, raw_id, covers=(raw_id,))
        for raw_id, message in ((50, question), (51, answer))
    ]
    items = [first, *between, second, third, latest]
    roomy = fit_context(items, 2_000)
    assert [item.source for item in roomy.items].count("raw") == 3  # nothing dropped
    whole = sum(item.tokens for item in roomy.items)
    for budget in (whole // 2, whole * 2 // 5):
        fitted = fit_context(items, budget)
        assert sum(item.tokens for item in fitted.items) <= budget
        (merged,) = [item for item in fitted.items if not item.pinned]
        text = merged.message.text  # type: ignore[union-attr]
        assert text.count("REFERENCE ONLY") == 1
        assert text.count("## Active Task") == 1
        # It stands for every loop and for the turns folded into it, and only for them.
        assert set(merged.covers) == {2, 3, 4, 50, 51}
        assert "Yes, go ahead." in text
        for value in ("mia_li_3668", "NO6JO3"):
            assert value in text
        assert fitted.items[-1] is latest


def test_dropped_turns_between_whole_handoffs_fold_where_they_were() -> None:
    """Summaries that fit whole still merge over the turns dropped between them.

    Else those turns fold into the first handoff, and a context shows the newer turns
    above the loop summaries that came before them.
    """
    first, second, _, latest = _loop_summaries()
    pad = "It is a large one, with wheels. " * 12
    question = UserMessage(content=f"Can I also add a checked bag to NO6JO3? {pad}")
    answer = AssistantMessage(content="Yes: one checked bag is $35, paid with gift_card_7219486.")
    seat = UserMessage(content="And a window seat, please? " + "By the wing. " * 10)
    given = AssistantMessage(content="Seat 12A is yours on HAT041. " + "Done. " * 10)

    def raw(loop: int, raw_id: int, message: Message) -> ContextItem:
        return ContextItem(message, message_tokens(message), "raw", loop, raw_id, covers=(raw_id,))

    items = [
        first,
        raw(3, 50, question),
        raw(3, 51, answer),
        second,
        raw(5, 60, seat),
        raw(5, 61, given),
        latest,
    ]
    whole = sum(item.tokens for item in fit_context(items, 5_000).items)
    budget = whole - 100  # the turns between the handoffs go; the newest stay
    fitted = fit_context(items, budget)
    assert sum(item.tokens for item in fitted.items) <= budget
    (merged,) = [item for item in fitted.items if item.source != "raw"]
    assert set(merged.covers) == {2, 50, 51, 3}
    assert [item.covers for item in fitted.items if item.source == "raw"] == [(60,), (61,), (99,)]
    text = merged.message.text  # type: ignore[union-attr]
    assert text.count("REFERENCE ONLY") == 1
    assert "gift_card_7219486" in text


def test_a_constraint_the_system_prompt_states_goes_before_the_users() -> None:
    """A digest read back from its text ranks every constraint alike; the system's go first."""
    rule = "Never book without the user's confirmation."
    preference = "I only fly nonstop and never before 9 am, my back cannot take early flights."
    handoff = (
        "## Active Task\nBook me the cheapest flight to Boston.\n\n"
        f"## Constraints & Preferences\n- {preference}\n- {rule}\n\n"
        "## Critical Context\n- user_id: mia_li_3668"
    )
    whole = estimate_tokens(handoff)
    assert shorten_summary(handoff, whole, [POLICY]) == shorten_summary(handoff, whole)
    budgets = range(whole - 1, 0, -1)
    cut = next(b for b in budgets if rule not in shorten_summary(handoff, b, [POLICY]))
    # The rule the system prompt states goes while the user's preference stays; without
    # the prompt, the older constraint (the preference) would have gone first.
    assert preference in shorten_summary(handoff, cut, [POLICY])
    plain = shorten_summary(handoff, cut)
    assert rule in plain
    assert preference not in plain


def test_a_tight_budget_frames_the_summary_tersely_before_it_shortens_it() -> None:
    digest = _digest(
        "## Active Task\nChange my flight to Boston and pay with gift_card_7219486.\n\n"
        "## Critical Context\n- user_id: mia_li_3668\n- reservation_id: NO6JO3"
    )
    latest = UserMessage(content="Thanks, that is all.")
    items = [ContextItem(latest, message_tokens(latest), "raw", 5, 99, covers=(99,), pinned=True)]
    roomy = fit_context(items, 2_000, digest=digest)
    assert SUMMARY_OPEN in roomy.items[0].message.text  # type: ignore[union-attr]
    whole = sum(item.tokens for item in roomy.items)
    saved = message_tokens(text_message(SUMMARY_OPEN)) - message_tokens(
        text_message(SUMMARY_OPEN_TERSE)
    )
    assert saved > 10
    fitted = fit_context(items, whole - saved, digest=digest)
    text = fitted.items[0].message.text  # type: ignore[union-attr]
    assert text.startswith(SUMMARY_OPEN_TERSE)
    # The framing gave way, not the facts.
    for value in ("Change my flight to Boston", "mia_li_3668", "NO6JO3"):
        assert value in text
    # At a budget the full framing alone would nearly fill, a summary is still sent.
    tiny = message_tokens(text_message(SUMMARY_OPEN)) + latest_tokens(items) + 30
    small = fit_context(items, tiny, digest=digest)
    assert sum(item.tokens for item in small.items) <= tiny
    assert any("Change my flight" in getattr(i.message, "text", "") for i in small.items)


def latest_tokens(items: list[ContextItem]) -> int:
    return sum(item.tokens for item in items if item.pinned)


def test_restored_file_reads_go_before_any_raw_turn() -> None:
    """A file read restored after a summary is a copy of tool output: cut before turns."""
    summary = CompactionSummaryMessage(
        summary="## Active Task\nFix the crash in src/parser.py", tokens_before=2_000
    )
    body = "\n".join(f"    line {i} of the parser" for i in range(150))
    restored = UserMessage(content=f"[Restored file after compaction] src/parser.py\n{body}")
    compacted = [
        ContextItem(summary, message_tokens(summary), "compacted", 1, None, 11, covers=(1,)),
        ContextItem(restored, message_tokens(restored), "compacted", 1, None, 12, covers=(2,)),
    ]
    raw = _items(_turns(3))[1:]
    items = [*compacted, *raw]
    whole = sum(item.tokens for item in items)
    budget = whole - compacted[1].tokens // 2
    fitted = fit_context(items, budget)
    assert sum(item.tokens for item in fitted.items) <= budget
    assert fitted.trimmed == 0  # every raw turn is still there
    texts = [getattr(item.message, "text", "") for item in fitted.items]
    assert not any("line 100 of the parser" in text for text in texts)
    assert any("Fix the crash in src/parser.py" in text for text in texts)


# ── a context that fits as loaded ─────────────────────────────────────────────


def test_a_context_that_fits_as_loaded_squeezes_no_output_to_plan_cuts() -> None:
    # The order raw turns would be dropped in (which needs every output of the newest
    # turns squeezed to measure them) is worked out only when a cut needs it.
    items = _items(_turns(40))
    renderer = Renderer(group_units(items, 1), 1_000_000, 1.0)
    rendered = renderer.render(FitState())
    assert [item.message for item in rendered.items] == [item.message for item in items]
    assert rendered is renderer.render(FitState())  # the fit asks for it three times
    assert renderer._outputs == {}
    assert "tail" not in vars(renderer)
    assert "folded" not in vars(renderer)
    # Asked for, the plan is the one the ladder cuts by: every raw turn in the tail.
    assert renderer.older == 0
    assert renderer.drop_order == sorted(renderer.tail) == renderer.droppable


def test_a_build_of_thousands_of_messages_runs_without_the_cyclic_collector() -> None:
    # Every message, item and unit of a build survives it: the collector would scan them
    # again and again as they pile up (most of a long build); paused, it runs at most
    # once, after the build (on its next allocation).
    view = stored(_turns(1_000))
    source = LoopSource(loop=view.loop, block=None, raw=view.messages)
    started: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    try:
        built = build([source], budget=10_000_000)
    finally:
        gc.callbacks.remove(count)
    assert len(built.items) == len(view.messages)
    assert len(started) <= 1, started
    assert gc.isenabled()


def test_the_digest_of_dropped_turns_never_carries_a_secret() -> None:
    """hermes-agent PR #9200: a key a tool printed must not come back in a summary."""
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8J9k0" * 2
    messages = _turns(12)
    leak = AssistantMessage(
        content=[
            ToolCall(id="k", name="bash", arguments={"command": f"export OPENAI_API_KEY={key}"})
        ]
    )
    messages[3:3] = [leak, ToolResultMessage(tool_call_id="k", content=f"set {key}\nExit code: 1")]
    fitted = fit_context(_items(messages), 900, task_loop_id=1)
    (built,) = [item for item in fitted.items if item.source == "built"]
    assert set(built.covers) >= {4, 5}  # the turn with the key is among those it stands for
    text = built.message.text  # type: ignore[union-attr]
    assert "OPENAI_API_KEY" in text
    assert key not in text
    assert "[REDACTED]" in text


@pytest.mark.parametrize(
    "continued",
    [
        "Continue the task stated before these turns.",
        # A continuing handoff that carries the user's later reply still only continues.
        'Continue the task stated before these turns.\nLater the user said: "Use staging."',
    ],
)
def test_the_loop_summary_that_states_the_task_is_shortened_after_those_that_continue_it(
    continued: str,
) -> None:
    """A harness's reply opened the second loop: its summary follows that request."""
    statement = (
        "The parser drops the Content-Length header when a request is chunked; "
        "it must keep it and count the body's bytes."
    )
    first = CompactionSummaryMessage(
        summary=f"## Active Task\n{statement}\n\n## Completed Actions\n"
        "1. READ src/parser.py - ok [tool: bash]",
        tokens_before=2_000,
    )
    latest = UserMessage(content="Please always provide EXACTLY ONE action, found 2.")
    second = CompactionSummaryMessage(
        summary=f"## Active Task\n{continued}\n\n"
        "## Completed Actions\n"
        + "".join(f"{i}. EDITED src/parser_{i}.py - exit 0 [tool: bash]\n" for i in range(1, 30))
        + "\n## Relevant Files\n"
        + "".join(f"- src/parser_{i}.py (edited)\n" for i in range(1, 30)),
        tokens_before=2_000,
    )
    items = [
        ContextItem(first, message_tokens(first), "compacted", 2, None, covers=(2,)),
        ContextItem(latest, message_tokens(latest), "raw", 3, 50, covers=(50,), pinned=True),
        ContextItem(second, message_tokens(second), "compacted", 3, None, covers=(3,)),
    ]
    whole = sum(item.tokens for item in items)
    for budget in (whole // 2, whole // 4, whole // 5):
        fitted = fit_context(items, budget)
        assert sum(item.tokens for item in fitted.items) <= budget
        summaries = [
            item.message.text  # type: ignore[union-attr]
            for item in fitted.items
            if item.source != "raw"
        ]
        # The newer loop's long lists gave way; the statement of the task is whole.
        assert statement in summaries[0]
        assert "EDITED src/parser_1.py" not in "\n".join(summaries)
