"""Fitting a handoff into a token budget by priority (pure).

The handoff is rendered whole when it fits. Otherwise `fit_handoff` applies trimming
stages in a fixed order, each as far as needed and no further (a binary search over how
many items it drops or shortens), and stops at the first that fits:

1. older completed actions collapse into `N-M.` runs (the newest five kept whole; a short
   command kept as typed); resolved questions, decisions, remaining work, questions the
   assistant waits on and system-prompt constraints go;
2. a task snapshot longer than half the budget is cut in the middle to half the budget
   (head and tail kept, with a marker; the user's later replies kept whole);
3. older reads and runs fold into one line (the newest three actions and the changes
   kept); active state, pending asks, in progress and the user's constraints go; the
   actions collapse too;
4. first-priority facts, least valuable first: files seen only in output, older
   failures; older actions fold (a folded change stays named by its tool and key), the
   goal shortens; the fold line's tallies go, then the values of records read, the
   user's older replies in the task (the latest kept; the constraints they state show
   instead) and the constraints, the newest actions but the last, then values,
   blockers, the last action (its changes stay named), files, the fold line and the goal;
5. the task snapshot is cut to what is left (`cut_task`: with little left, the request's
   opening alone), and a hard cut guarantees the budget.

The values action lines show are listed with the critical values (`with_action_values`)
and shown only once an action line no longer shows them.

Items that mention the focus topic are dropped last within every stage.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from sessionstore._tokens import estimate_tokens
from sessionstore._tool_calls import SHELL_TOOLS
from sessionstore.summarizers._actions import MUTATING_VERBS
from sessionstore.summarizers._handoff import (
    Action,
    Handoff,
    Item,
    render_handoff,
    tallies,
)
from sessionstore.summarizers._harness import (
    is_placeholder,
    statement_part,
    without_examples,
)
from sessionstore.summarizers._said import without_markup
from sessionstore.summarizers._scan import (
    code_identifiers,
    collapse,
    cut,
    record_values,
)
from sessionstore.summarizers._task_cut import cut_task, older_replies_saving

__all__ = ["fit_handoff"]

SNAPSHOT_SHARE = 0.5
"""The share of the budget the task snapshot keeps before first-priority facts are cut."""
KEEP_FULL_ACTIONS = 5
"""Newest completed actions kept in full while older ones are collapsed."""
KEEP_ACTIONS = 3
"""Newest completed actions kept while older ones are folded into one line."""
MIN_SHARE_CUT = 80
"""A task snapshot less than this over its share is not cut for the share (stage 2)."""
SHORT_GOAL_CHARS = 160
RUN_TARGET_CHARS = 120
SHORT_TARGET_CHARS = 48
"""A target this short stays whole when its action is collapsed."""
RUN_OUTCOME_CHARS = 80
CUT_MARKER = "\n[… cut to fit the budget]"
_STOPWORDS = frozenset(
    ["the", "and", "for", "with", "from", "into", "about", "that", "this", "what", "when"]
)


@dataclass(slots=True)
class _Plan:
    collapse: int = 0
    fold: int = 0
    drop_actions: int = 0
    goal_cut: int = 0
    task_cut: int = 0
    drops: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class _Stage:
    get: Callable[[_Plan], int]
    set: Callable[[_Plan, int], _Plan]
    limit: int


class _Fitter:
    def __init__(self, doc: Handoff, budget: int, focus: str | None, branch: bool) -> None:
        self.doc = doc = with_task_values(with_action_values(doc))
        self.budget = budget
        self.branch = branch
        self.words = _focus_words(focus)
        self.order = {name: self.drop_order(items) for name, items in doc.lists().items()}
        focused = {i for i, a in enumerate(doc.actions) if self.is_focus(_action_text(a))}
        newest = [i for i in range(len(doc.actions)) if i not in focused][-KEEP_ACTIONS:]
        last = set(newest)
        changing = [
            i
            for i, a in enumerate(doc.actions)
            if a.verb in MUTATING_VERBS and i not in focused and i not in last
        ]
        later = focused | last | set(changing)
        plain = [i for i in range(len(doc.actions)) if i not in later]
        # Older reads and runs fold first; then what changed something (edits, bookings,
        # a submission); then the newest actions (what the agent was doing, its last
        # commands); what the focus topic names, last.
        self.action_order = plain + changing + newest + sorted(focused)
        self.plain_actions = len(plain)
        self.older_actions = len(plain) + len(changing)
        self.shown_actions = len(doc.actions) - self.older_actions
        """Actions still shown once the older ones are folded (the newest, the focused)."""

    def drop_order(self, items: list[Item]) -> list[int]:
        """Return the indices of `items` in the order they go: off-topic, low rank, old first."""
        keys = [(self.is_focus(item.text), item.rank, i) for i, item in enumerate(items)]
        return [i for *_, i in sorted(keys)]

    def is_focus(self, text: str) -> bool:
        lowered = text.lower()
        return any(word in lowered for word in self.words)

    # ── rendering a plan ──────────────────────────────────────────────────────

    def render(self, plan: _Plan) -> str:
        doc = self.doc
        view = Handoff(
            task=cut_task(doc.task, plan.task_cut),
            goal=_cut_goal(doc.goal, plan.goal_cut),
            actions=self.actions(plan),
            # A digest of turns that continue an earlier task keeps saying so.
            later=doc.later,
            continued=doc.continued,
        )
        kept = view.lists()
        for name, items in doc.lists().items():
            dropped = set(self.order[name][: plan.drops.get(name, 0)])
            kept[name].extend(item for i, item in enumerate(items) if i not in dropped)
        # What the task snapshot already shows verbatim is not repeated below it.
        task = collapse(view.task)
        goal = collapse(view.goal)
        if goal in task or goal in collapse(without_markup(view.task)):
            view.goal = ""  # the task shows it (its tags aside, as `gist_of` made the goal)
        view.constraints = [i for i in view.constraints if collapse(i.text.rstrip("…")) not in task]
        view.pending = [i for i in view.pending if collapse(i.text.rstrip("…")) not in task]
        critical, view.critical = view.critical, []
        shown = render_handoff(view, branch=self.branch)
        tokens = shown_tokens(shown)
        view.critical = [
            item
            for item in critical
            if len(item.identity) < MIN_SHOWN_CHARS or not _is_shown(item.identity, shown, tokens)
        ]
        return render_handoff(view, branch=self.branch) if view.critical else shown

    def actions(self, plan: _Plan) -> list[Action]:
        """Return the action lines a plan shows.

        `plan.fold` actions (in `action_order`) are folded into one line of tallies;
        with `plan.drop_actions` at 1 that line keeps only the changes it names, each
        step past 1 drops one more of the actions still shown (in `action_order`), and
        past all of them the fold line goes too.
        """
        actions = self.doc.actions
        if not actions or plan.drop_actions > self.shown_actions + 1:
            return []
        folded = set(self.action_order[: plan.fold])
        dropped = set(self.action_order[plan.fold : plan.fold + max(0, plan.drop_actions - 1)])
        collapsed = set(self.action_order[: plan.collapse])
        result: list[Action] = []
        if folded or dropped:
            # Dropped actions that changed something stay named with the folded ones.
            gone = [actions[i] for i in sorted(folded | dropped)]
            first = min(a.first for a in gone)
            last = max(a.last for a in gone)
            numbers = (
                f"{first}-{last}. " if first and last > first else f"{first}. " if first else ""
            )
            done = _changes_done(gone)
            if not plan.drop_actions:
                tally = ", ".join(f"{verb} x{n}" for verb, n in tallies(gone).items())
                result.append(Action(0, 0, "", "", line=f"{numbers}(earlier: {tally}{done})"))
            elif done:
                result.append(Action(0, 0, "", "", line=f"{numbers}(earlier{done})"))
        run: list[Action] = []
        for index, action in enumerate(actions):
            if index in folded or index in dropped:
                continue
            if index in collapsed and action.verb:
                if run and (run[-1].verb, run[-1].tool) != (action.verb, action.tool):
                    result.append(_collapse(run))
                    run = []
                run.append(action)
                continue
            if run:
                result.append(_collapse(run))
                run = []
            result.append(action)
        if run:
            result.append(_collapse(run))
        return result

    # ── fitting ───────────────────────────────────────────────────────────────

    def fits(self, text: str) -> bool:
        return estimate_tokens(text) <= self.budget

    def stages(self) -> list[_Stage]:
        doc = self.doc
        lists = doc.lists()
        total = len(doc.actions)

        def drop(name: str, max_rank: int | None = None) -> _Stage:
            items = lists[name]
            if max_rank is None:
                limit = len(items)
            else:
                limit = sum(
                    1 for item in items if item.rank <= max_rank and not self.is_focus(item.text)
                )

            def setter(plan: _Plan, k: int) -> _Plan:
                return replace(plan, drops={**plan.drops, name: k})

            return _Stage(lambda plan: plan.drops.get(name, 0), setter, limit)

        def knob(attribute: str, limit: int) -> _Stage:
            def setter(plan: _Plan, k: int) -> _Plan:
                changed = replace(plan)
                setattr(changed, attribute, k)
                return changed

            return _Stage(lambda plan: int(getattr(plan, attribute)), setter, limit)

        task_bytes = len(doc.task.encode())
        share_bytes = int(self.budget * 4 * SNAPSHOT_SHARE)
        share_cut = 0
        if task_bytes > share_bytes:
            share_cut = int(len(doc.task) * (task_bytes - share_bytes) / task_bytes) + 1
            if share_cut < MIN_SHARE_CUT:
                share_cut = 0  # the marker would cost about what the cut saves
        return [
            knob("collapse", self.plain_actions - (KEEP_FULL_ACTIONS - KEEP_ACTIONS)),
            drop("Resolved Questions"),
            drop("Key Decisions"),
            drop("Remaining Work"),
            drop("In Progress", max_rank=1),
            drop("Constraints & Preferences", max_rank=0),
            drop("Blocked", max_rank=0),
            drop("Critical Context", max_rank=0),
            knob("task_cut", share_cut),
            knob("fold", self.plain_actions),
            drop("Active State", max_rank=1),
            drop("Constraints & Preferences", max_rank=1),
            drop("Pending User Asks"),
            drop("In Progress"),
            knob("collapse", total),
            drop("Relevant Files", max_rank=1),
            drop("Blocked", max_rank=1),
            knob("goal_cut", max(0, len(doc.goal) - SHORT_GOAL_CHARS)),
            drop("Active State", max_rank=2),
            knob("fold", self.older_actions),
            # A line of tallies holds no fact an agent can use (the changes it names stay).
            knob("drop_actions", 1),
            # Values of the records read (a user's reservations, payment methods) are the
            # ids the next calls need: they outlive the constraints and the action lines.
            drop("Critical Context", max_rank=1),
            # The user's older replies (the latest stays) go before their constraints,
            # which show once the reply that states them no longer does.
            knob("task_cut", share_cut + older_replies_saving(doc.task)),
            drop("Constraints & Preferences"),
            # The newest actions go oldest first (an action line costs the tokens of
            # several values); the last command stays until the values have gone.
            knob("drop_actions", max(1, self.shown_actions)),
            drop("Critical Context", max_rank=2),
            drop("Relevant Files", max_rank=2),
            drop("Blocked", max_rank=2),
            # The last action line costs the tokens of several values and files; what it
            # changed stays named (`done:`), and its values stay listed.
            knob("drop_actions", self.shown_actions + 1),
            drop("Critical Context"),
            drop("Relevant Files"),
            knob("drop_actions", self.shown_actions + 2),
            knob("goal_cut", len(doc.goal)),
            drop("Active State", max_rank=3),
            drop("Active State"),
            drop("Blocked"),
            knob("task_cut", len(doc.task)),
        ]

    def fit(self) -> str:
        plan = _Plan()
        text = self.render(plan)
        if self.fits(text):
            return text
        for stage in self.stages():
            low = stage.get(plan)
            if stage.limit <= low:
                continue
            widest = stage.set(plan, stage.limit)
            text = self.render(widest)
            if not self.fits(text):
                plan = widest
                continue
            high = stage.limit
            while high - low > 1:
                middle = (low + high) // 2
                candidate = self.render(stage.set(plan, middle))
                if self.fits(candidate):
                    high, text = middle, candidate
                else:
                    low = middle
            return text
        return _hard_cut(text, self.budget)


def fit_handoff(
    doc: Handoff,
    budget: int,
    *,
    focus: str | None = None,
    branch: bool = False,
    system: Sequence[str] = (),
) -> str:
    """Return the handoff rendered within `budget` tokens (as `estimate_tokens` counts them).

    Args:
        doc: The handoff.
        budget: The most tokens the text may take.
        focus: A topic; items mentioning it are dropped last.
        branch: Frame the text as the digest of an abandoned branch.
        system: The system prompts sent with it: a constraint one of them states goes
            first, as a system prompt's constraint does in a fresh digest (a digest read
            back from its text no longer says where each constraint came from).
    """
    if system and doc.constraints:
        doc = replace(doc, constraints=_system_ranked(doc.constraints, system))
    text = _Fitter(doc, budget, focus, branch).fit()
    return text if estimate_tokens(text) <= budget else _hard_cut(text, budget)


def _system_ranked(constraints: list[Item], system: Sequence[str]) -> list[Item]:
    """Return the constraints, those a system prompt states at a system prompt's rank (0)."""
    stated = collapse(" ".join(system))
    return [
        replace(item, rank=0) if collapse(item.text.rstrip("…")) in stated else item
        for item in constraints
    ]


_ACTION_VALUE = re.compile(r"(?<![\w.])([A-Za-z_]\w{0,40})=([\w.@#:+/$-]*\w)(?=[,) ]|$)")
_RESULT_LIST = re.compile(r"\b\d+ results?: ([^\[]+?)(?= -| \[|$)")
MAX_ACTION_VALUES = 40
MIN_SHOWN_CHARS = 4
ACTION_VALUE_RANK = 3
"""A value this short is listed in Critical Context even when other text shows it."""
"""Values of action lines listed with the critical values (the newest actions' first)."""


def with_action_values(doc: Handoff) -> Handoff:
    """Return the handoff with the values its action lines show among its critical values.

    A digest does not repeat in Critical Context a value an action line shows (`(reservation_id=
    K1NW8N)`, `3 results: HAT1, HAT2`); when those lines are folded to fit a smaller budget
    (now, or when the digest is re-fitted later), the values come back there instead of being
    lost. They rank with the identifiers of the task (`ACTION_VALUE_RANK`): the ids a
    call used or a record read returned are what the next calls need.
    """
    listed = {item.identity for item in doc.critical}
    found: dict[str, Item] = {}
    for action in reversed(doc.actions):
        text = action.line or f"{action.target} - {action.outcome}"
        pairs = [(m.group(1), m.group(2)) for m in _ACTION_VALUE.finditer(text)]
        for match in _RESULT_LIST.finditer(text):
            words = [w.strip() for w in match.group(1).split(",")]
            pairs.extend(("result", w) for w in words if w and " " not in w and w != "…")
        for name, value in pairs:
            # Shorter values are listed even where shown (`render`): they are not carried.
            if len(value) < MIN_SHOWN_CHARS or value in listed or value in found:
                continue
            found[value] = Item(f"{name}={value}", rank=ACTION_VALUE_RANK, key=value)
        if len(found) >= MAX_ACTION_VALUES:
            break
    if not found:
        return doc
    values = list(found.values())[:MAX_ACTION_VALUES]
    return replace(doc, critical=[*doc.critical, *reversed(values)])


MAX_TASK_VALUES = 40
LEADING_TASK_VALUES = 15
"""The first identifiers of a task statement, which name its subject, rank above the rest."""


def with_task_values(doc: Handoff) -> Handoff:
    """Return the handoff with the identifiers of its task statement among its critical values.

    A digest does not repeat in Critical Context a value its task snapshot shows; when the
    snapshot is cut to fit a smaller budget (a digest read back and re-fitted when a
    context is built), the names of the part cut come back there instead of being lost.
    Only the statement's own: a harness's standing instructions and the placeholders of
    their examples (`MY_ENV_VAR`) are not facts of the session.
    """
    statement = without_examples(statement_part(doc.task))
    found = [*code_identifiers(statement), *record_values(statement, from_user=True)]
    values = [
        value
        for value in dict.fromkeys(found)
        if len(value) >= MIN_SHOWN_CHARS and not is_placeholder(value)
    ][:MAX_TASK_VALUES]
    listed = {item.identity for item in doc.critical}
    added = [
        Item(value, rank=4 if index < LEADING_TASK_VALUES else 3, key=value)
        for index, value in enumerate(values)
        if value not in listed
    ]
    return replace(doc, critical=[*doc.critical, *added]) if added else doc


_DELIMITERS = re.compile(r"[^\w.@#:+/$-]+")
_SEPARATORS = re.compile(r"([.@#:+/$-])")
MAX_TOKEN_PIECES = 24
"""Pieces of one token (`src/pkg/io.py:12`) whose runs are indexed; a longer token is
indexed whole and by piece only."""


def shown_tokens(text: str) -> set[str]:
    """Return the values `text` shows: each token, and each run of its pieces.

    A token is a run of value characters (word characters and `.@#:+/$-`); its pieces
    are the words between separators (`.`, `/`, `:`, ...), so `src/pkg/io.py:12` shows
    `io.py`, `pkg/io.py` and `12` but not `io.p`. Membership in this set is how a value is found
    in a rendered digest without a substring search per value: the search made fitting a
    digest of many thousand actions quadratic.
    """
    found: set[str] = set()
    for token in _DELIMITERS.split(text):
        if not token or token in found:
            continue
        found.add(token)
        parts = _SEPARATORS.split(token)
        if len(parts) == 1:
            continue
        if len(parts) > 2 * MAX_TOKEN_PIECES:
            found.update(parts[::2])
            continue
        for start in range(0, len(parts), 2):
            for end in range(start + 1, len(parts) + 1, 2):
                found.add("".join(parts[start:end]))
    return found


def _is_shown(value: str, text: str, tokens: set[str]) -> bool:
    """Return True when `text` shows `value`.

    A token-like value is looked up among `tokens` (a token, or a run of its pieces);
    any other value (`May 17, 2024`) is searched for in the text.
    """
    if _DELIMITERS.search(value) is None:
        return value in tokens
    return value in text


def _focus_words(focus: str | None) -> list[str]:
    if not focus:
        return []
    lowered = focus.lower()
    words = [w for w in re.findall(r"\w+", lowered) if len(w) >= 3 and w not in _STOPWORDS]
    if words:
        return words
    stripped = " ".join(re.findall(r"\w+", lowered))
    return [stripped] if len(stripped) >= 2 else []


def _action_text(action: Action) -> str:
    return action.line or f"{action.verb} {action.target} {action.outcome} {action.tool}"


MAX_FOLDED_CHANGES = 6


def _changes_done(actions: list[Action]) -> str:
    """Return the state changes among folded actions, as `; done: tool key, ...`.

    What a call changed (a booking, a cancellation, a submission, a file a harness's
    editor changed) stays named, by its tool and its first value or target, when the
    line it had is folded; the newest `MAX_FOLDED_CHANGES` of them.
    """
    done: list[str] = []
    for action in actions:
        if action.verb not in MUTATING_VERBS or not action.tool:
            continue
        if action.tool.lower() in SHELL_TOOLS or action.tool == "user shell":
            continue
        match = _ACTION_VALUE.search(action.target)
        key = match.group(2) if match else (action.brief or action.target)
        key = cut(key, RUN_OUTCOME_CHARS // 2)
        entry = key if key.startswith(action.tool) else f"{action.tool} {key}"
        if entry not in done:
            done.append(entry)
    return f"; done: {', '.join(done[-MAX_FOLDED_CHANGES:])}" if done else ""


def _collapse(run: list[Action]) -> Action:
    """Return a run of actions with one verb and tool as one short line."""
    # A short command is kept as typed (`python run.py`, not `run.py`): it can be re-run.
    briefs = list(
        dict.fromkeys(
            a.target if len(a.target) <= SHORT_TARGET_CHARS else a.brief or a.target for a in run
        )
    )
    outcomes = Counter(a.outcome.split(", ")[0] for a in run if a.outcome)
    summary = ", ".join(f"{o} x{n}" if n > 1 else o for o, n in outcomes.items())
    first = run[0]
    return Action(
        first.first,
        max(a.last for a in run),
        first.verb,
        cut("; ".join(briefs), RUN_TARGET_CHARS),
        cut(summary, RUN_OUTCOME_CHARS),
        first.tool,
        brief=first.brief,
    )


def _cut_goal(goal: str, remove: int) -> str:
    if remove <= 0:
        return goal
    return cut(goal, len(goal) - remove) if remove < len(goal) else ""


def _hard_cut(text: str, budget: int) -> str:
    """Return `text` cut to at most `budget` tokens, with a marker when there is room."""
    limit = budget * 4
    data = text.encode()
    if len(data) <= limit:
        return text
    room = limit - len(CUT_MARKER.encode())
    if room <= 0:
        return data[:limit].decode("utf-8", "ignore")
    return data[:room].decode("utf-8", "ignore") + CUT_MARKER
