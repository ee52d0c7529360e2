"""Every code block in `docs/` runs (or, for a command line, parses) as written.

- A page's ```python blocks run in order, as one script, in a fresh directory; top-level
  `await` is allowed, as in an asyncio REPL. The example server address of the summarizer
  docs (`http://localhost:8000/v1`) is pointed at a fake OpenAI-compatible server.
- A ```bash or ```console line (here or in the README) that starts with `sessionstore`
  must parse: its commands and options exist and take the values given (click resolves
  it without running it).
- A block right after `<!-- docs-test: excerpt PATH -->` is a fragment of PATH: it must
  appear there verbatim. After `<!-- docs-test: skip REASON -->` a block is not run; the
  reason says why (for example, it downloads), and the test reports it as skipped.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

from sessionstore.cli import main
from tests.fakes import serve_chat

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXAMPLE_SERVER = "http://localhost:8000/v1"

_FENCE = re.compile(
    r"(?:<!-- docs-test: (?P<marker>skip|excerpt) (?P<arg>[^\n]*?) -->\n)?"
    r"^```(?P<lang>[a-z]*)[^\n]*\n(?P<body>.*?)^```",
    flags=re.DOTALL | re.MULTILINE,
)

_RUNNER = """
import ast, asyncio, sys, types
source = open(sys.argv[1]).read()
code = compile(source, sys.argv[1], "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
module = types.ModuleType("__main__")
sys.modules["__main__"] = module
result = eval(code, module.__dict__)
if asyncio.iscoroutine(result):
    asyncio.run(result)
"""


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    lang: str
    body: str
    marker: str | None
    arg: str


def blocks(page: Path) -> Iterator[Block]:
    text = page.read_text()
    for match in _FENCE.finditer(text):
        yield Block(
            page=page,
            line=text.count("\n", 0, match.start("body")),
            lang=match["lang"],
            body=match["body"],
            marker=match["marker"],
            arg=match["arg"] or "",
        )


PAGES = sorted(DOCS.rglob("*.md"))
PYTHON_PAGES = [p for p in PAGES if any(b.lang == "python" for b in blocks(p))]
ALL_BLOCKS = [b for p in PAGES for b in blocks(p)]
README_BLOCKS = list(blocks(ROOT / "README.md"))  # its Python example runs in test_docs.py


def _id(path: Path) -> str:
    return str(path.relative_to(DOCS if path.is_relative_to(DOCS) else ROOT))


def _block_id(block: Block) -> str:
    return f"{_id(block.page)}:{block.line}"


@pytest.mark.parametrize("page", PYTHON_PAGES, ids=_id)
def test_the_python_blocks_of_a_page_run(page: Path, tmp_path: Path) -> None:
    page_blocks = [b for b in blocks(page) if b.lang == "python"]
    runnable = [b for b in page_blocks if b.marker is None]
    if not runnable:
        pytest.skip("; ".join(f"line {b.line}: {b.marker} {b.arg}" for b in page_blocks))
    with serve_chat() as (url, _handler):
        script = tmp_path / "page.py"
        script.write_text("\n".join(b.body.replace(EXAMPLE_SERVER, f"{url}/v1") for b in runnable))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
        result = subprocess.run(
            [sys.executable, "-c", _RUNNER, str(script)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
            check=False,
        )
    assert result.returncode == 0, result.stderr


def _command_lines(block: Block) -> Iterator[list[str]]:
    for raw in block.body.splitlines():
        line = raw.removeprefix("$ ").strip()
        words = shlex.split(line, comments=True)
        while words and "=" in words[0] and not words[0].startswith("-"):
            words = words[1:]  # VAR=value before the command
        if words and words[0] == "sessionstore":
            yield _until_shell_syntax(words[1:])


def _until_shell_syntax(words: list[str]) -> list[str]:
    for index, word in enumerate(words):
        if word in {">", ">>", "|", "<", "&&", ";", "2>"}:
            return words[:index]
    return words


SHELL_BLOCKS = [
    b
    for b in [*ALL_BLOCKS, *README_BLOCKS]
    if b.lang in {"bash", "console", "sh"} and list(_command_lines(b))
]


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=_block_id)
def test_the_command_lines_parse(
    block: Block, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for args in _command_lines(block):
        for word in args:  # the input files a command names exist (empty) for the parse
            if word.endswith((".jsonl", ".json")) and not word.startswith(("/", "-")):
                (tmp_path / word).parent.mkdir(parents=True, exist_ok=True)
                (tmp_path / word).touch()
        _parse(args)


def _parse(args: list[str]) -> None:
    """Resolve a command line down to its leaf command and parse the leaf's options."""
    command: click.Command = main
    context = command.make_context("sessionstore", list(args))
    rest = _unparsed(context)
    while isinstance(command, click.Group) and rest:
        name, *rest = rest
        sub = command.get_command(context, name)
        assert sub is not None, f"no command {name!r} in `sessionstore {shlex.join(args)}`"
        command = sub
        context = command.make_context(name, rest, parent=context)
        rest = _unparsed(context)
    assert rest == [] or not isinstance(command, click.Group), shlex.join(args)


def _unparsed(context: click.Context) -> list[str]:
    """The tokens a group left for its subcommand (click 8 splits them; click 9 will not)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        protected = list(getattr(context, "protected_args", []))
    return [*protected, *context.args]


EXCERPTS = [b for b in ALL_BLOCKS if b.marker == "excerpt"]


@pytest.mark.parametrize("block", EXCERPTS, ids=_block_id)
def test_an_excerpt_is_in_its_source(block: Block) -> None:
    source = (ROOT / block.arg).read_text()

    assert block.body.strip() in source


def test_every_skipped_block_says_why() -> None:
    skipped = [b for b in ALL_BLOCKS if b.marker == "skip"]

    assert all(len(b.arg.split()) >= 3 for b in skipped), [_block_id(b) for b in skipped]
