"""The diagnosis's recall and precision on the catalogues, and what one diagnosis costs.

    python benchmarks/diagnose.py

Runs ``python -m kata.catalogue.diagnose --evaluate`` in this process (every catalogued mistake bound into the reference
must be named, and nothing else; the reference and every valid variant must get no diagnosis), then times ``kata
diagnose`` on a submission in a fresh process, as ``kata check`` and ``kata grade`` start it: on a copy of the reference
(every function probed, the whole catalogue run) and on the stubs (nothing to diagnose).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from machine import describe_machine

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kata.catalogue.diagnose import Catalogue, evaluate, print_scores  # noqa: E402
from kata.concepts.manifest import CONCEPTS  # noqa: E402


def fresh_diagnosis_seconds(folder: Path) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kata.catalogue.diagnose", "--impl", str(folder), "--json"], cwd=ROOT,
                   check=True,
                   capture_output=True)
    return time.perf_counter() - started


def main() -> int:
    print(describe_machine())
    started, cpu = time.perf_counter(), time.process_time()
    scores = evaluate(list(CONCEPTS), Catalogue())
    print_scores(scores, time.perf_counter() - started)
    print(f"the evaluation's CPU time: {time.process_time() - cpu:.1f} s (less sensitive to a busy machine)")
    print(f"load average after it: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as scratch:
        for name in ("solutions", "exercises"):
            copy = Path(scratch) / name
            shutil.copytree(ROOT / name, copy)
            print(f"kata diagnose --impl <copy of {name}/>: {fresh_diagnosis_seconds(copy):.1f} s in a fresh process")
    return 0


if __name__ == "__main__":
    sys.exit(main())
