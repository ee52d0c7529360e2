r"""Stored text made safe for the operator's terminal: control characters shown, never obeyed.

Stored text is hostile: a tool output, a title or a message can hold what an agent read on
a web page, escape sequences included, which would clear the operator's screen, recolour
it, set the window's title or hide text. `printable` is the one place that neutralises
them; every renderer goes through it:

- `cells`, `one_line` and `text` (table cells and rich text) and `echo` (plain lines)
  call it on the text they are given;
- the console of `stdout` passes everything it renders through it once more (`_Printable`),
  so a renderer that forgets cannot leak; rich's own styling is added after, untouched;
- `json_text` escapes, in JSON, the characters `json.dumps(ensure_ascii=False)` leaves raw:
  the document stays exact JSON (`json.loads` gives back the stored text).

>>> printable("ok\x1b[2J\x1b]0;owned\x07 \u202egnp.exe")
'ok\\x1b[2J\\x1b]0;owned\\x07 \\u202egnp.exe'
>>> printable("line one\n\tline two")
'line one\n\tline two'
"""

from __future__ import annotations

import re
from typing import Any

import click
from rich.console import (
    Console,
    ConsoleOptions,
    ConsoleRenderable,
    RenderableType,
    RenderHook,
    RenderResult,
)
from rich.measure import Measurement
from rich.segment import Segment
from rich.text import Text

__all__ = ["echo", "json_text", "printable", "printable_console", "text"]

_BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
"""Bidirectional controls: they reorder what is shown (`\u202e` makes `exe.txt` read `txt.exe`)."""

_UNSAFE = re.compile(
    f"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f{_BIDI}\u2028\u2029\ud800-\udfff]|\r(?!\n)"
)
"""What a terminal may obey rather than show: C0 controls but tab, newline and the carriage
return of a CRLF line end (a lone one sends the cursor back to overwrite the line), DEL,
C1 controls (`\x9b` is a CSI on some terminals), bidirectional controls, the Unicode line
and paragraph separators, and lone surrogates (which cannot be written as UTF-8)."""

_JSON_UNSAFE = re.compile(f"[\x7f-\x9f{_BIDI}\u2028\u2029\ud800-\udfff]")
"""The characters of `_UNSAFE` that `json.dumps(ensure_ascii=False)` writes raw."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(value: str) -> str:
    r"""Return `value` with every character a terminal could obey shown as an escape.

    ESC becomes the four characters `\x1b`, a bidirectional override `\u202e`; tab,
    newline and CRLF line ends are kept (multi-line text stays multi-line), and so is every
    printable character, non-ASCII ones included.
    """
    return _UNSAFE.sub(_escape, value)


def json_text(document: str) -> str:
    r"""Return a JSON document with the characters a terminal could obey written as `\uXXXX`.

    Those characters can only stand inside JSON strings, where `\uXXXX` means the same
    character: the document decodes to the same value.
    """
    return _JSON_UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", document)


def text(value: object, style: str = "") -> Text:
    """Return a rich `Text` of `value` (printable; never read as rich markup)."""
    return Text(printable(str(value)), style=style)


def echo(value: str = "", *, err: bool = False, nl: bool = True) -> None:
    """Print a line of plain text, made printable, on stdout (or stderr)."""
    click.echo(printable(value), err=err, nl=nl)


class _Printable:
    """A renderable that renders another, with the text of each segment made printable."""

    def __init__(self, renderable: RenderableType) -> None:
        self.renderable = renderable

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for segment in console.render(self.renderable, options):
            # A control segment is rich's own (cursor moves); styles are not in the text.
            if segment.control or not _UNSAFE.search(segment.text):
                yield segment
            else:
                yield Segment(printable(segment.text), segment.style)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement.get(console, options, self.renderable)


class _PrintableHook(RenderHook):
    def process_renderables(self, renderables: list[ConsoleRenderable]) -> list[ConsoleRenderable]:
        return [_Printable(renderable) for renderable in renderables]


def printable_console(**options: Any) -> Console:
    """Return a rich console that shows whatever it prints as printable text."""
    console = Console(**options)
    console.push_render_hook(_PrintableHook())
    return console
