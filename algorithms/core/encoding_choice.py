"""Which code a problem's genome gets (:func:`make_encoding`; the codes are described in
:mod:`isles.algorithms.core.encodings`)."""

from __future__ import annotations

import numpy as np
from isles.algorithms.core.encodings import ENCODINGS_REAL, Bits, Encoding
from isles.algorithms.core.real_codes import Binary, Gray, Seed002


def problem_genome(problem) -> str:
    """``"bits"`` for natively binary problems (``problem.genome == "bits"``), else ``"real"``."""
    return "bits" if getattr(problem, "genome", "real") == "bits" else "real"


def make_encoding(name: str, problem, bits_per_variable: int = 16, nvdec: int = 8, nvbin: int = 4) -> Encoding:
    """The encoding ``name`` for ``problem``.

    Args:
        name: ``auto`` (``bits`` for a natively binary problem, else ``binary``), ``binary``,
            ``gray``, ``seed002`` (real-valued problems: ``problem.dim``, ``problem.lower``,
            ``problem.upper``) or ``bits`` (``problem.genome == "bits"``, ``problem.n_bits``).
        problem: the problem.
        bits_per_variable: ``b`` of binary/gray; nvdec, nvbin: seed002's digits.

    An encoding never leaves the problem's box: ``binary`` and ``gray`` decode into
    ``problem.lower..problem.upper``; ``seed002`` decodes into the seed's fixed domain ``[-1, 1]``
    and is refused for any other box (rather than searching outside it, or only part of it).

    Raises:
        ValueError: one line naming ``algorithm.encoding`` and the values allowed for this problem
            (a real encoding on a bit problem or vice versa, ``seed002`` on a box other than
            ``[-1, 1]`` in every variable, or an unknown name), or a bad
            ``bits_per_variable``/``nvdec``/``nvbin``.
    """
    kind = problem_genome(problem)
    pname = getattr(problem, "name", type(problem).__name__)
    if kind == "bits":
        if name not in ("auto", "bits"):
            raise ValueError(
                f"algorithm.encoding={name!r}: problem {pname} is natively binary; allowed values are bits|auto"
            )
        n_bits = getattr(problem, "n_bits", None)
        return Bits(n_bits if n_bits is not None else problem.dim)
    if name not in ("auto",) + ENCODINGS_REAL:
        raise ValueError(
            f"algorithm.encoding={name!r}: problem {pname} is real-valued; allowed values are "
            f"{'|'.join(ENCODINGS_REAL)}|auto"
        )
    if name in ("auto", "binary"):
        return Binary(problem.dim, bits_per_variable, problem.lower, problem.upper)
    if name == "gray":
        return Gray(problem.dim, bits_per_variable, problem.lower, problem.upper)
    lo, hi = np.asarray(problem.lower, dtype=np.float64), np.asarray(problem.upper, dtype=np.float64)
    if not (np.all(lo == -1.0) and np.all(hi == 1.0)):
        raise ValueError(
            f"algorithm.encoding=seed002 decodes into seed 002's domain [-1, 1], not the box of problem "
            f"{pname} (lower {_short(lo)}, upper {_short(hi)}); allowed values for this box are "
            f"binary|gray|auto (they decode into problem.lower..problem.upper)"
        )
    return Seed002(problem.dim, nvdec, nvbin)


def _short(v: np.ndarray) -> str:
    """A bound vector for a one-line message: one number when all are equal, else the first few."""
    if v.size and np.all(v == v[0]):
        return f"{v[0]:g}"
    return "[" + ", ".join(f"{x:g}" for x in v[:6]) + (", ..." if v.size > 6 else "") + "]"
