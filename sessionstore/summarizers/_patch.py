"""Patches in the envelope format of `apply_patch` (Codex and the agents that share its tool).

```
*** Begin Patch
*** Update File: src/app.py
@@ def main():
-    print("hi")
+    print("hello")
*** Add File: notes.txt
+first line
*** Delete File: old.py
*** End Patch
```

An agent that edits this way sends the patch as a tool's whole input (`apply_patch`) or in
a shell command (`apply_patch <<'EOF' ... EOF`). `read_patch` finds the files it touches,
each with its note, and writes its changes as a unified diff, which the working state reads
like any other diff (`diff_hunks`): its hunks carry no line numbers (`@@ -0 +0 @@`), their
context line (`@@ def main():`) names the symbol.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["BEGIN_PATCH", "Patch", "read_patch"]

BEGIN_PATCH = "*** Begin Patch"
_FILE = re.compile(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$")
_MOVE = re.compile(r"^\*\*\* Move to: (.+?)\s*$")
_NOTES = {"Add": "created", "Update": "edited", "Delete": "deleted"}


@dataclass(slots=True)
class Patch:
    """What a patch does: the files it touches, each with its note, and its unified diff."""

    files: list[tuple[str, str]] = field(default_factory=list)
    diff: str = ""

    @property
    def paths(self) -> str:
        """The files it touches, each once, in order, as one line (`a.py, b.py`)."""
        return ", ".join(dict.fromkeys(path for path, _ in self.files))

    @property
    def verb(self) -> str:
        """The action's verb: CREATED or DELETED when every file is, else EDITED."""
        notes = {note for _, note in self.files}
        if notes == {"created"}:
            return "CREATED"
        return "DELETED" if notes == {"deleted"} else "EDITED"


def read_patch(text: str) -> Patch | None:
    """Return what the `*** Begin Patch` envelope in `text` does, or None when it has none."""
    start = text.find(BEGIN_PATCH)
    if start < 0:
        return None
    patch = Patch()
    out: list[str] = []
    path = ""
    in_hunk = False
    for line in text[start + len(BEGIN_PATCH) :].split("\n"):
        if line.startswith("*** End Patch"):
            break
        found = _FILE.match(line)
        if found:
            kind, path = found.group(1), found.group(2)
            patch.files.append((path, _NOTES[kind]))
            out += [f"diff --git a/{path} b/{path}", f"+++ b/{path}"]
            in_hunk = kind == "Add"
            if in_hunk:
                out.append("@@ -0,0 +0 @@")
            continue
        moved = _MOVE.match(line)
        if moved and path:
            if out[-2:] == [f"diff --git a/{path} b/{path}", f"+++ b/{path}"]:
                del out[-2:]  # the hunks that follow are the moved file's
            path = moved.group(1)
            patch.files.append((path, "written"))
            out += [f"diff --git a/{path} b/{path}", f"+++ b/{path}"]
            continue
        if not path:
            continue
        if line.startswith("@@"):
            out.append(f"@@ -0 +0 @@ {line[2:].strip()}".rstrip())
            in_hunk = True
        elif line.startswith(("+", "-", " ")):
            if not in_hunk:  # an update whose first hunk has no `@@` line
                out.append("@@ -0 +0 @@")
                in_hunk = True
            out.append(line)
    if not patch.files:
        return None
    patch.diff = "\n".join(out)
    return patch
