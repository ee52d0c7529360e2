"""What a shell command does: its verb, its target and the files it touches (pure).

A command's verb is the strongest of its parts' (`cd x && pytest` is TESTED, `sed -i` is
EDITED, `cat > f` WROTE, `grep` SEARCHED, `cat` READ); heredoc bodies and quoted
arguments (scripts, patterns, messages) are not read for paths.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sessionstore.summarizers._patch import BEGIN_PATCH, read_patch
from sessionstore.summarizers._scan import collapse, cut, find_paths

__all__ = [
    "BRIEF_CHARS",
    "CHANGE_NOTES",
    "TARGET_CHARS",
    "Call",
    "describe_command",
    "harness_command",
]

TARGET_CHARS = 160
BRIEF_CHARS = 48
CHANGE_NOTES = {"EDITED": "edited", "WROTE": "written", "CREATED": "created", "DELETED": "deleted"}

# Command verbs, strongest first: a command's verb is the strongest of its parts'.
_COMMAND_VERBS = (
    "SUBMITTED",
    "TESTED",
    "EDITED",
    "WROTE",
    "DELETED",
    "CREATED",
    "INSTALLED",
    "RAN",
    "CHECKED",
    "SEARCHED",
    "READ",
    "LISTED",
)
_TEST_COMMAND = re.compile(
    r"^(?:python\d?(?:\.\d+)? +(?:-\S+ +)*-m +(?:pytest|unittest|tox|nox|nose)|pytest|py\.test"
    r"|tox|nox|nosetests|(?:npm|yarn|pnpm|bun) +(?:run +)?test|(?:go|cargo|dotnet|swift|mix)"
    r" +test|make +(?:test|check)|(?:python\d?(?:\.\d+)? +)?(?:\S*/)?runtests\.py|mvnw?|ant"
    r"|sbt|gradlew?|javac|rspec|(?:python\d?(?:\.\d+)? +)?(?:\./)?(?:manage|setup)\.py +test"
    r"|jest|vitest|mocha|karma|phpunit|ctest|bin/test"
    # A script named like a test (`python test_edge_cases.py`, `python x_test.py`).
    r"|python\d?(?:\.\d+)? +(?:-\S+ +)*(?:\S*/)?(?:test_\w*|\w+_tests?|tests?)\.py)(?:\s|$)"
)
"""A command that runs tests (or compiles, as `javac` does), by its program or script."""
_SIMPLE_VERBS = {
    "cat": "READ",
    "head": "READ",
    "tail": "READ",
    "less": "READ",
    "more": "READ",
    "nl": "READ",
    "bat": "READ",
    "wc": "READ",
    "awk": "READ",
    "grep": "SEARCHED",
    "egrep": "SEARCHED",
    "rg": "SEARCHED",
    "ag": "SEARCHED",
    "ack": "SEARCHED",
    "find": "SEARCHED",
    "fd": "SEARCHED",
    "locate": "SEARCHED",
    "ls": "LISTED",
    "tree": "LISTED",
    "du": "LISTED",
    "rm": "DELETED",
    "rmdir": "DELETED",
    "mkdir": "CREATED",
    "touch": "CREATED",
    "cp": "WROTE",
    "mv": "WROTE",
    "patch": "EDITED",
    "pip": "INSTALLED",
    "pip3": "INSTALLED",
    "apt": "INSTALLED",
    "apt-get": "INSTALLED",
    "conda": "INSTALLED",
    "brew": "INSTALLED",
}
_IGNORED_WORDS = frozenset(
    [
        "cd",
        "export",
        "source",
        "set",
        "true",
        ":",
        "echo",
        "printf",
        "pushd",
        "popd",
        "unset",
        "alias",
    ]
)
_PREFIX_WORDS = frozenset(["sudo", "time", "env", "nice", "nohup", "command", "exec"])
_QUOTED = re.compile(r"'[^'\n]*'|\"(?:[^\"\\\n]|\\.)*\"")
_SEGMENT_SPLIT = re.compile(r"&&|\|\||;|\||\n")
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_]\w*)\1")
_REDIRECT = re.compile(r"(?<![<>&\d])>{1,2}\s*([^\s;&|<>]+)")
_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=\S*$")


@dataclass(frozen=True, slots=True)
class Call:
    """What a call did, before its result is known."""

    verb: str
    target: str
    tool: str
    brief: str
    files: list[tuple[str, str]] = field(default_factory=list)
    """The paths it names, each with a note (`edited`, ...) or `""`."""
    values: list[tuple[str, str]] = field(default_factory=list)
    """The id-like `(key, value)` pairs among its arguments."""
    command: str = ""
    edit_lines: tuple[int, int] | None = None
    """The line range an editor command replaces (SWE-agent's `edit 124:144`)."""
    replacement: str = ""
    """The text an editor command writes (the body of `edit N:M`, `str_replace`'s `new_str`)."""
    original: str = ""
    """The text an editor tool replaces (`old_str`, `old_string`): where the edit is."""
    on_open_file: bool = False
    """The command acts on the file the harness has open (`edit N:M`, `goto N`, `scroll_down`)."""
    patch: str = ""
    """The changes the call applies, as a unified diff (an `apply_patch` envelope's)."""
    tested: str = ""
    """The parts of a TESTED command that run the tests, when its line says more first (a
    script written by a heredoc, then run): `python3 test_x.py`, what can be run again."""


# Editor commands of harnesses that give the agent its own interface (SWE-agent and the
# like): the file they act on is the one opened last.
_EDIT_COMMAND = re.compile(r"^edit(?:\s+(\d+)(?:\s*:\s*(\d+))?)?\s*$")
"""`edit N:M`, or `edit` alone: the interface variant that replaces the text between
cursors (`set_cursors N M`) of the open file."""
_HARNESS_VERBS = {
    "open": "READ",
    "goto": "READ",
    "scroll_down": "READ",
    "scroll_up": "READ",
    "create": "CREATED",
    "search_file": "SEARCHED",
    "search_dir": "SEARCHED",
    "find_file": "SEARCHED",
    "submit": "SUBMITTED",
}
_END_OF_EDIT = re.compile(r"^\s*end_of_edit\s*$")


def harness_command(command: str, *, tool: str) -> Call | None:
    """Return the call an editor command of a harness stands for, or None for other commands.

    `open PATH [N]`, `goto N`, `scroll_down`, `create PATH`, `edit N:M` (or `edit` and
    `set_cursors N M`) followed by the replacement lines (up to `end_of_edit`),
    `search_file`, `find_file`, `search_dir`, `submit`. A file named by `open`/`create` is
    noted; `edit`/`goto`/`scroll_*`/`set_cursors` act on the open file, which the caller
    tracks.
    """
    lines = command.strip("\n").split("\n")
    first = lines[0].strip()
    words = first.split()
    if not words:
        return None
    edit = _EDIT_COMMAND.match(first)
    if edit is not None and (edit.group(1) or len(lines) > 1):
        start = int(edit.group(1)) if edit.group(1) else None
        end = int(edit.group(2) or start) if start is not None else None
        body = lines[1:]
        if body and _END_OF_EDIT.match(body[-1]):
            body = body[:-1]
        return Call(
            verb="EDITED",
            target=cut(collapse(command), TARGET_CHARS),
            tool=tool,
            brief=first,
            command=command,
            edit_lines=(start, end) if start is not None and end is not None else None,
            replacement="\n".join(body),
            on_open_file=True,
        )
    head = words[0]
    if head == "set_cursors" and len(words) == 3 and all(w.isdigit() for w in words[1:]):
        return Call("READ", first, tool, first, command=command, on_open_file=True)
    verb = _HARNESS_VERBS.get(head)
    if verb is None or (len(lines) > 1 and head != "submit"):
        return None
    if head in ("goto", "scroll_down", "scroll_up"):
        if len(words) > 2 or (head == "goto" and (len(words) != 2 or not words[1].isdigit())):
            return None
        return Call(verb, first, tool, first, command=command, on_open_file=True)
    if head == "submit":
        return Call(verb, first, tool, cut(first, BRIEF_CHARS), command=command)
    if head in ("open", "create"):
        if len(words) < 2 or len(words) > 3 or (len(words) == 3 and not words[2].isdigit()):
            return None
        path = words[1].strip("\"'")
        note = CHANGE_NOTES.get(verb, "")
        return Call(verb, first, tool, path, files=[(path, note)], command=command)
    quoted = [w.strip("\"'") for w in words[1:]]
    files = [(w, "") for w in quoted[1:] if find_paths(w, lenient=True)]
    return Call(verb, first, tool, cut(first, BRIEF_CHARS), files=files, command=command)


def describe_command(command: str, *, tool: str) -> Call:
    """Return the verb, target and files of a shell command.

    The verb is the strongest among the command's parts (`cd x && pytest` is TESTED);
    the target is the command's first line as written; heredoc bodies and quoted
    arguments are not read for paths, while the files a part edits or writes get a note.
    A harness's own editor command (`open`, `edit N:M`, ...) is read by `harness_command`.
    """
    harness = harness_command(command, tool=tool)
    if harness is not None:
        return harness
    # Quoted arguments are patterns, scripts and messages (`sed -i 's/a/b/'`, `grep "x"`,
    # `python -c "..."`), not the files a command touches.
    unquoted = _QUOTED.sub(" ", _strip_heredocs(command))
    verbs: list[str] = []
    files: dict[str, str] = {}
    for segment in _SEGMENT_SPLIT.split(unquoted):
        verb = _segment_verb(segment.strip())
        if verb is not None:
            verbs.append(verb)
        note = CHANGE_NOTES.get(verb or "", "")
        written = {m.group(1) for m in _REDIRECT.finditer(segment)}
        for path in find_paths(segment, lenient=True):
            if path.startswith("-"):
                continue
            files[path] = files.get(path) or ("written" if path in written else note)
    patch = read_patch(command) if BEGIN_PATCH in command and "apply_patch" in command else None
    if patch is not None:  # `apply_patch <<'EOF'`: the envelope is in a heredoc's body
        verbs.append(patch.verb)
        for path, note in patch.files:
            files[path] = note
    verb = min(verbs, key=_COMMAND_VERBS.index) if verbs else "RAN"
    tested = _tested_parts(command) if verb == "TESTED" and _HEREDOC.search(command) else ""
    lines = [line for line in command.strip().split("\n") if line.strip()]
    first = lines[0].strip() if lines else ""
    # The command as typed, on one line: a heredoc's first lines say what was written.
    target = cut(collapse(command), TARGET_CHARS)
    if patch is not None:  # the envelope's text says less than the files it changes
        target = cut(f"apply_patch {patch.paths}", TARGET_CHARS)
    paths = [p for p in files if not p.startswith("/") or p.count("/") > 1][:2]
    return Call(
        verb=verb,
        target=target,
        tool=tool,
        brief=", ".join(paths) if paths else cut(first, BRIEF_CHARS),
        files=list(files.items()),
        command=command,
        patch=patch.diff if patch is not None else "",
        tested=tested,
    )


_TEST_PART_SPLIT = re.compile(r"&&|\|\||;|\n")
"""Where a command's parts end, pipes aside (`pytest x | tail` is one test run)."""


def _tested_parts(command: str) -> str:
    """Return the parts of a command that run tests, heredoc bodies left out, joined."""
    parts = [part.strip() for part in _TEST_PART_SPLIT.split(_strip_heredocs(command))]
    tested = [
        part
        for part in parts
        if part and _segment_verb(_QUOTED.sub(" ", part).split("|", 1)[0].strip()) == "TESTED"
    ]
    return cut(" && ".join(tested), TARGET_CHARS)


def _segment_verb(segment: str) -> str | None:
    words = segment.split()
    while words and (words[0] in _PREFIX_WORDS or _ASSIGNMENT.match(words[0])):
        words.pop(0)
        if words and words[0].isdigit():  # `timeout 30 cmd`, `nice 10 cmd`
            words.pop(0)
    if words and words[0] == "timeout":
        words = [w for w in words[1:] if not w[:1].isdigit() and not w.startswith("-")]
    if not words:
        return None
    head = words[0].rsplit("/", 1)[-1]
    rest = " ".join([head, *words[1:]])
    if head in _IGNORED_WORDS:
        return "WROTE" if _REDIRECT.search(segment) else None
    if _TEST_COMMAND.match(rest) or words[0].endswith("bin/test"):
        return "TESTED"
    if head in ("sed", "perl") and re.search(r"\s-[a-zA-Z]*i", segment):
        return "EDITED"
    if head == "sed":
        return "READ"
    if head == "git":
        sub = words[1] if len(words) > 1 else ""
        if sub in ("apply", "am", "checkout", "restore", "stash", "revert"):
            return "EDITED"
        if sub == "grep":
            return "SEARCHED"
        return "CHECKED" if sub in ("diff", "status", "log", "show", "blame") else "RAN"
    if head in ("npm", "yarn", "pnpm", "poetry", "uv", "cargo", "go") and "install" in words[:3]:
        return "INSTALLED"
    if head in _SIMPLE_VERBS:
        if head in ("cat", "tail", "head") and _REDIRECT.search(segment):
            return "WROTE"
        return _SIMPLE_VERBS[head]
    return "RAN"


def _strip_heredocs(command: str) -> str:
    """Return the command without the bodies of its heredocs (code, not paths touched)."""
    lines = command.split("\n")
    kept: list[str] = []
    ending: str | None = None
    for line in lines:
        if ending is not None:
            if line.strip() == ending:
                ending = None
            continue
        kept.append(line)
        match = _HEREDOC.search(line)
        if match:
            ending = match.group(2)
    return "\n".join(kept)
