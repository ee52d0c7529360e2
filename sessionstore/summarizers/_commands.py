"""What a shell command does: its verb, its target and the files it touches (pure).

A command's verb is the strongest of its parts' (`cd x && pytest` is TESTED, `sed -i` is
EDITED, `cat > f` WROTE, `grep` SEARCHED, `cat` READ); heredoc bodies and quoted
arguments (scripts, patterns, messages) are not read for paths.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sessionstore.summarizers._scan import cut, find_paths

__all__ = ["BRIEF_CHARS", "CHANGE_NOTES", "TARGET_CHARS", "Call", "describe_command"]

TARGET_CHARS = 160
BRIEF_CHARS = 48
CHANGE_NOTES = {"EDITED": "edited", "WROTE": "written", "CREATED": "created", "DELETED": "deleted"}

# Command verbs, strongest first: a command's verb is the strongest of its parts'.
_COMMAND_VERBS = (
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
    r"^(?:python\d?(?:\.\d+)? +-m +(?:pytest|unittest|tox|nox)|pytest|py\.test|tox|nox"
    r"|(?:npm|yarn|pnpm|bun) +(?:run +)?test|go +test|cargo +test|make +(?:test|check)"
    r"|(?:python\d?(?:\.\d+)? +)?(?:\./)?(?:tests/)?runtests\.py|mvn +test|gradle +test|rspec"
    r"|(?:python\d?(?:\.\d+)? +)?(?:\./)?(?:manage|setup)\.py +test|(?:\./)?gradlew +test"
    r"|jest|vitest|phpunit|ctest|bin/test)\b"
)
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


def describe_command(command: str, *, tool: str) -> Call:
    """Return the verb, target and files of a shell command.

    The verb is the strongest among the command's parts (`cd x && pytest` is TESTED);
    the target is the command's first line as written; heredoc bodies and quoted
    arguments are not read for paths, while the files a part edits or writes get a note.
    """
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
    verb = min(verbs, key=_COMMAND_VERBS.index) if verbs else "RAN"
    lines = [line for line in command.strip().split("\n") if line.strip()]
    first = lines[0].strip() if lines else ""
    target = cut(first, TARGET_CHARS)
    if len(lines) > 1 and not target.endswith("…"):
        target += " …"
    paths = [p for p in files if not p.startswith("/") or p.count("/") > 1][:2]
    return Call(
        verb=verb,
        target=target,
        tool=tool,
        brief=", ".join(paths) if paths else cut(first, BRIEF_CHARS),
        files=list(files.items()),
        command=command,
    )


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
    if _TEST_COMMAND.match(rest):
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
