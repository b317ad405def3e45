"""One array-module detector (issue 36 §4): :func:`isles.algorithms.core.backend.array_module`, used by
the algorithms and the runtime alike, in place of four private copies."""

import re
from pathlib import Path

import numpy as np
from isles.algorithms.core import backend, population
from isles.algorithms.ga import operators
from isles.islands.migration import contract, policies

ROOT = Path(__file__).resolve().parents[1]


def test_numpy_arrays_scalars_and_lists_are_numpy_s():
    for a in (np.zeros((2, 3)), np.float32(1.5), 2.0, [1, 2], np.zeros(0, dtype=np.uint32)):
        assert backend.array_module(a) is np
    pop = population.Population(np.zeros((1, 2, 3)), np.zeros((1, 2)), np.zeros((1, 2)))
    assert pop.xp is np


def test_every_module_asks_the_one_detector():
    for module in (population, operators, contract, policies):
        assert module.array_module is backend.array_module, module.__name__
    copies = []
    for part in ("algorithms", "islands", "problems", "app"):
        for path in sorted((ROOT / part).rglob("*.py")):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if re.search(r"__module__\.startswith\([\"']cupy", line):
                    copies.append(f"{path.relative_to(ROOT)}:{n}")
    assert copies == []
