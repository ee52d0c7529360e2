"""The README's Python example runs as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_readme_python_example_runs(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    code = re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)[0]
    script = tmp_path / "example.py"
    script.write_text(code)
    result = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    *lines, context, interrupted = result.stdout.splitlines()
    assert [line.split()[-1] for line in lines] == ["user", "assistant", "tool_result"]
    assert [line.split()[1] for line in lines] == ["0", "1", "1"]  # turn indices
    tokens, _, budget, *_ = context.split()
    assert 0 < int(tokens) <= int(budget) == 32_000
    assert context.endswith("3 messages")
    assert interrupted == "[]"
    assert (tmp_path / "sessionstore.db").exists()
