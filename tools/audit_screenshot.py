"""Take the screenshot of `sessionstore audit --html` that the docs show.

Builds a synthetic session in a temporary SQLite file (two compactions of the default
overlay, one of a `tight` overlay), writes its report with the CLI, opens it in a
headless Chromium through Selenium and saves a PNG. Needs the `dev` extra and Chromium
with its driver (Debian: `apt-get install chromium chromium-driver`):

    python tools/audit_screenshot.py                      # docs/images/audit-report.png
    python tools/audit_screenshot.py --out /somewhere/else.png --width 1400
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
from pathlib import Path

from click.testing import CliRunner
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from sessionstore import CompactionConfig, SessionStore, compact_session_loops
from sessionstore._demo import generate_session
from sessionstore.cli import main

ROOT = Path(__file__).resolve().parents[1]


async def build_session(url: str) -> str:
    """Store a synthetic session and compact it twice, then once more as another overlay."""
    history = generate_session(seed=7, loops=5, turns_per_loop=14)
    config = CompactionConfig(keep_first_turns=1, keep_recent_turns=3, tool_output_max_lines=6)
    async with SessionStore.from_url(url) as store:
        await store.upgrade()
        session = await store.create_session(app_name="docs", user_id="u", title="Screenshot")
        for messages in history[:4]:
            await store.start_loop(session.id)
            await store.append_messages(session.id, messages)
        await compact_session_loops(store, session.id, config=config)
        await store.start_loop(session.id)
        await store.append_messages(session.id, history[4])
        await compact_session_loops(store, session.id, config=config)
        tight = config.model_copy(update={"keep_recent_turns": 1, "max_summary_tokens": 300})
        await compact_session_loops(store, session.id, config=tight, overlay="tight")
        return session.id


def chromium() -> webdriver.Chrome:
    """Start a headless Chromium through the chromedriver on the PATH."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if binary is None or driver is None:
        raise SystemExit("needs chromium and chromedriver on the PATH")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(driver), options=options)


def main_() -> None:
    """Build the session, write its report, and photograph it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images" / "audit-report.png")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=1500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        url = f"sqlite+aiosqlite:///{Path(scratch) / 'screenshot.db'}"
        session_id = asyncio.run(build_session(url))
        report = Path(scratch) / "report.html"
        command = ["--url", url, "audit", session_id, "--html", str(report)]
        result = CliRunner().invoke(main, command)
        if result.exit_code != 0:
            raise SystemExit(result.output)
        browser = chromium()
        try:
            browser.set_window_size(args.width, args.height)
            browser.get(report.as_uri())
            # Only the current loop's turns open, with one summary expanded, so the picture
            # shows the timeline, both columns and what expanding does.
            browser.execute_script(
                """
                const view = document.querySelector('.view:not([hidden])');
                const loops = view.querySelectorAll('.loop');
                loops.forEach((loop, i) => {
                  loop.querySelector('details.turns').open = i === loops.length - 1;
                });
                const current = loops[loops.length - 1];
                current.querySelector('details.expand').open = true;
                """
            )
            args.out.parent.mkdir(parents=True, exist_ok=True)
            browser.save_screenshot(str(args.out))
        finally:
            browser.quit()
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main_()
