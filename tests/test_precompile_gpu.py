"""The first GPU run with an empty kernel cache: the experiment's kernels compiled by worker
processes (algorithms/core/precompile.py) give the same result as CuPy compiling them in line,
and fill the cache. Run on a GPU machine: python -m pytest -m gpu tests/test_precompile_gpu.py"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from isles.algorithms.core import kernel_lists

from tests.gpu import cupy_or_skip

pytestmark = pytest.mark.gpu
cp = cupy_or_skip()
ROOT = Path(__file__).resolve().parents[1]


def _cold_run(tmp_path: Path, name: str, precompiled: bool) -> tuple[str, str, Path]:
    cache = tmp_path / f"cache-{name}"
    env = {
        **os.environ,
        "CUPY_CACHE_DIR": str(cache),
        "ISLES_PRECOMPILE": "1" if precompiled else "0",
        "ISLES_PRECOMPILE_STATS": "1",
    }
    p = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "+experiment=de_islands", "device=gpu", "logger=none", "progress=false"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("isles: best f="))
    return line.split(" wall=")[0], p.stderr, cache


def test_precompiled_cold_run_equals_the_plain_one(tmp_path):
    plain, _, _ = _cold_run(tmp_path, "plain", precompiled=False)
    pre, stderr, cache = _cold_run(tmp_path, "pre", precompiled=True)
    assert pre == plain
    listed = len(kernel_lists.load_lists()["experiments"]["de_islands"])
    stats = re.search(
        r"isles: precompile de_islands: (\d+) kernels listed, (\d+) compiled by \d+ workers, "
        r"the run waited for (\d+) and compiled (\d+) itself",
        stderr,
    )
    assert stats, stderr[-2000:]
    n, compiled, waited, taken = map(int, stats.groups())
    assert n == listed and compiled >= 1
    assert waited + taken >= listed // 2  # the run's own requests are the listed kernels (none compiled twice)
    assert len(os.listdir(cache)) >= listed
