"""A longer soak of the reliability tests: the same tests as CI, scaled up, with their figures.

    PYTHONPATH=. python bench/soak_reliability.py --scale 10
    PYTHONPATH=. python bench/soak_reliability.py --scale 4 --postgres postgresql+asyncpg://postgres@127.0.0.1:5432/test

Runs `tests/reliability/` with SESSIONSTORE_SOAK_SCALE (kills, appends and retried batches
multiplied by the scale) and prints what each test recorded: kills survived, writes
acknowledged, appends under contention, timeouts retried, inputs tried; lost must be 0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import log, machine_info

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", type=int, default=10, help="multiply the CI counts by this")
    parser.add_argument("--postgres", help="a PostgreSQL URL (default: SQLite only)")
    parser.add_argument("-k", dest="select", help="pytest -k expression, to soak some tests")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "soak.jsonl"
        env = {
            **os.environ,
            "SESSIONSTORE_SOAK_SCALE": str(args.scale),
            "SESSIONSTORE_SOAK_REPORT": str(report),
        }
        if args.postgres:
            env["SESSIONSTORE_TEST_POSTGRES_URL"] = args.postgres
        else:
            env.pop("SESSIONSTORE_TEST_POSTGRES_URL", None)
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/reliability",
        ]
        if args.select:
            command += ["-k", args.select]
        log(f"soak at scale {args.scale}: {' '.join(command)}")
        started = time.perf_counter()
        result = subprocess.run(command, cwd=ROOT, env=env, check=False)
        elapsed = time.perf_counter() - started
        rows = (
            [json.loads(line) for line in report.read_text().splitlines()]
            if report.exists()
            else []
        )

    print(json.dumps(machine_info(), indent=2))
    print(f"\nscale {args.scale}, {elapsed:.0f} s, pytest exit {result.returncode}\n")
    for row in rows:
        test, backend = row.pop("test"), row.pop("backend")
        figures = ", ".join(f"{key} {value:,}" for key, value in row.items())
        print(f"- {test} ({backend}): {figures}")
    sys.exit(result.returncode)


if __name__ == "__main__":
    main()
