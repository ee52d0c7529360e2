"""How the commands print: rich tables and text by default, JSON with `--json`.

One module per kind of result: sessions, a compaction, a built context, an audit, and
the demo's report, which reuses the last three; `_output` holds what they share, and
`_printable` the one rule for stored text on a terminal (escapes shown, never obeyed). `_html`
(the audit as a web page, from a Jinja template in `templates/`) is imported only by
`audit --html`, so no other command loads the template engine.
"""

from typing import TYPE_CHECKING

from sessionstore._lazy import lazy_exports

if TYPE_CHECKING:
    from sessionstore.cli._render._audit import audit_json, print_audit
    from sessionstore.cli._render._compaction import compaction_json, print_compaction
    from sessionstore.cli._render._context import ContextFormat, print_context
    from sessionstore.cli._render._demo import demo_json, print_demo
    from sessionstore.cli._render._output import print_json, progress_bar
    from sessionstore.cli._render._printable import echo, json_text, printable
    from sessionstore.cli._render._sessions import print_session, print_session_page, session_json

__all__ = [
    "ContextFormat",
    "audit_json",
    "compaction_json",
    "demo_json",
    "echo",
    "json_text",
    "print_audit",
    "print_compaction",
    "print_context",
    "print_demo",
    "print_json",
    "print_session",
    "print_session_page",
    "printable",
    "progress_bar",
    "session_json",
]

# Where each name lives: imported on first use (PEP 562), so importing one module of
# the package does not import the others.
_SOURCES: dict[str, tuple[str, ...]] = {
    "sessionstore.cli._render._audit": ("audit_json", "print_audit"),
    "sessionstore.cli._render._compaction": (
        "compaction_json",
        "print_compaction",
    ),
    "sessionstore.cli._render._context": (
        "ContextFormat",
        "print_context",
    ),
    "sessionstore.cli._render._demo": (
        "demo_json",
        "print_demo",
    ),
    "sessionstore.cli._render._output": (
        "print_json",
        "progress_bar",
    ),
    "sessionstore.cli._render._printable": (
        "echo",
        "json_text",
        "printable",
    ),
    "sessionstore.cli._render._sessions": (
        "print_session",
        "print_session_page",
        "session_json",
    ),
}
__getattr__, __dir__ = lazy_exports(__name__, globals(), _SOURCES)
