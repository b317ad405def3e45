"""The contract between isles and a user's migration policy (``islands.selection``,
``islands.replacement``; :mod:`isles.islands.migration.policies`): what a policy is handed, and
what it must return.

**What it is handed.** Beside its arrays, a policy whose method takes one more argument
(``select(self, f, v, k, context)``, ``replace(self, residents, immigrants, valid, context)``; any
name, or a keyword ``context``) gets a :class:`MigrationContext`: the global ids of the islands
(row ``i`` of the arrays is island ``island_ids[i]``), their generation, the epochs completed, and
a counter-based generator (:class:`~isles.algorithms.core.random.CounterRNG`) keyed by (seed,
island, generation, draw) like every random number of a run, apart from the algorithm's own
numbers and separate for selection and replacement. A policy that draws from it picks the same
individuals whatever the grouping of the islands over actors (``tests/test_migration_policies.py``).
A method with the old signature (``select(self, f, v, k)``) is called as before.

**What it must return** is checked for every policy but the built-in classes themselves, which
are trusted (the fused kernels, :mod:`isles.islands.migration.fused`, stay as they are): the
island group wraps a user's policy in :func:`guarded`. A return that breaks the contract (a
shape, a dtype, an index out of range or repeated, an ``order`` that is no permutation, an
accepted padding slot, a resident changed where nothing was accepted) is refused at the first
migration with one line naming the class, its method and what was expected
(:class:`PolicyError`), instead of records that count migrants which never landed. The values
are read on the host: on NumPy at every call, on CuPy at the first call of each new shape only
(a host synchronisation per migration would stall the device, and a captured CUDA graph allows
none; a span's first epochs always run plain, so the first call is never captured).
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import numpy as np
from isles.algorithms.core.backend import array_module, to_host
from isles.algorithms.core.random import CounterRNG, mix64_int
from isles.islands.migration.policies import FairReplace, ReplaceWorst, SelectBest

#: the classes whose returns are trusted (exactly these, not subclasses)
TRUSTED = (SelectBest, FairReplace, ReplaceWorst)
#: per method, the salt that keys its generator apart from the algorithm's (and from the other method's)
SALTS = {"select": 0x5E1EC7_0000_0001, "replace": 0x5E1EC7_0000_0002}


class PolicyError(RuntimeError):
    """A user's migration policy returned what breaks its contract (one line: the class, its
    method, what it returned and what was expected); a failure inside the run (exit status 1)."""


@dataclasses.dataclass(frozen=True)
class MigrationContext:
    """What a migration policy may know beside its arrays (module docstring).

    Attributes:
        island_ids: ``(I,)`` global island ids: row ``i`` of ``f``, ``v``, ``residents`` and
            ``immigrants`` is island ``island_ids[i]``.
        generation: the islands' generation at this migration (the same for selection and
            replacement of one migration).
        epoch: the epochs completed: this is the migration after epoch ``epoch``.
        rng: a :class:`~isles.algorithms.core.random.CounterRNG` over ``island_ids``, keyed by the
            run's seed and the method (``select`` or ``replace``): ``rng.uniform(generation, draw,
            shape)`` gives ``(I, *shape)`` numbers that depend on (seed, island, generation, draw)
            only. :meth:`uniform`, :meth:`integers` and :meth:`normal` draw at this generation.
        role: the population role (``None`` for an algorithm with one population).
    """

    island_ids: tuple
    generation: int
    epoch: int
    rng: Any
    role: Any = None

    @property
    def xp(self):
        """The array module (``numpy`` or ``cupy``)."""
        return self.rng.xp

    def uniform(self, shape, draw: int = 0, dtype=np.float64):
        """Uniform numbers in [0, 1), ``(I, *shape)``, of draw ``draw`` (``0 <= draw < 32768``; one
        per use within the method) at this generation."""
        return self.rng.uniform(self.generation, draw, shape, dtype)

    def integers(self, shape, high: int, draw: int = 0):
        """Integers in ``[0, high)``, int64 ``(I, *shape)``, of draw ``draw`` at this generation."""
        return self.rng.integers(self.generation, draw, shape, high)

    def normal(self, shape, draw: int = 0, dtype=np.float64):
        """Standard normal numbers ``(I, *shape)`` of draw ``draw`` at this generation."""
        return self.rng.normal(self.generation, draw, shape, dtype)

    def part(self, rows: slice) -> MigrationContext:
        """The context of the islands at ``rows`` of this one (a batch of several families
        selects per family, :func:`isles.islands.migration.moves.emigrants_of`)."""
        ids = self.island_ids[rows]
        rng = CounterRNG(self.rng.xp, self.rng.seed, ids)
        rng.ctr = self.rng.ctr  # one device counter: a graph's replays advance both
        return dataclasses.replace(self, island_ids=ids, rng=rng)


def policy_rng(xp, seed: int, island_ids, method: str, ctr=None) -> CounterRNG:
    """The generator of ``method``'s contexts (``select`` or ``replace``): a
    :class:`~isles.algorithms.core.random.CounterRNG` over ``island_ids`` whose seed is the run's
    ``seed`` mixed with the method's salt (:data:`SALTS`), so that its numbers are not the
    algorithm's own; ``ctr``: the device counter to share (the group's generator's, which a
    captured graph's replays advance)."""
    rng = CounterRNG(xp, mix64_int(int(seed) ^ SALTS[method]), island_ids)
    if ctr is not None:
        rng.ctr = ctr
    return rng


def context_passing(policy, method: str, n_args: int) -> str | None:
    """How ``policy.<method>`` takes a context after its ``n_args`` arrays: ``"keyword"`` (a
    parameter ``context``, or ``**kwargs``), ``"positional"`` (one more positional parameter of
    another name, or ``*args``), or ``None`` (the old signature: no context)."""
    try:
        sig = inspect.signature(getattr(policy, method))
    except (TypeError, ValueError):  # a builtin or C callable: the documented signature
        return None
    for how, extra in (("keyword", {"context": None}), ("positional", {})):
        try:
            sig.bind(*range(n_args + (how == "positional")), **extra)
            return how
        except TypeError:
            continue
    return None


def takes_context(policy, method: str, n_args: int) -> bool:
    """Whether ``policy.<method>`` accepts a context after its ``n_args`` arrays
    (:func:`context_passing`)."""
    return context_passing(policy, method, n_args) is not None


def guarded(policy, method: str):
    """``policy`` itself where its returns are trusted (:data:`TRUSTED`, or already guarded), else
    a :class:`GuardedSelection` (``method="select"``) or :class:`GuardedReplacement`
    (``"replace"``) around it. Either way the result's method takes the context last
    (``select(f, v, k, context)``), for the runtime's call sites."""
    if type(policy) in TRUSTED or isinstance(policy, Guarded):
        return policy
    return GuardedSelection(policy) if method == "select" else GuardedReplacement(policy)


def uses_context(*policies) -> bool:
    """Whether any of ``policies`` (as :func:`guarded` returns them) takes a context."""
    return any(getattr(p, "takes_context", False) for p in policies)


class Guarded:
    """A user's policy whose returns are checked (module docstring); picklable.

    Args:
        policy: the user's policy object.
    """

    method = ""
    n_args = 0

    def __init__(self, policy):
        self.policy = policy
        self.passing = context_passing(policy, self.method, self.n_args)
        self.takes_context = self.passing is not None
        self.seen: set = set()  # the call shapes already checked (CuPy)

    def __repr__(self):
        return f"{type(self).__name__}({self.policy!r})"

    def _call(self, args, context):
        fn = getattr(self.policy, self.method)
        if self.passing == "keyword":
            return fn(*args, context=context)
        return fn(*args, context) if self.passing else fn(*args)

    def _due(self, xp, key) -> bool:
        """Whether the values of this call are checked: always on NumPy, once per ``key`` on CuPy."""
        if xp is np:
            return True
        if key in self.seen:
            return False
        self.seen.add(key)
        return True

    def fail(self, got: str, expected: str):
        """Raise :class:`PolicyError`: ``<Class>.<method> returned <got>; expected <expected>``."""
        raise PolicyError(f"{type(self.policy).__qualname__}.{self.method} returned {got}; expected {expected}")


def _shape(a) -> str:
    return str(tuple(int(n) for n in a.shape))


def _is_array(a, xp) -> bool:
    return hasattr(a, "shape") and hasattr(a, "dtype") and array_module(a) is xp


def _where(context, row: int) -> str:
    return f"island {context.island_ids[row]}" if context is not None else f"row {row}"


def _kind(a, xp) -> str:
    """What ``a`` is, where it is not an array of ``xp``."""
    if hasattr(a, "shape") and hasattr(a, "dtype"):
        return f"a {array_module(a).__name__} array on {xp.__name__}'s device"
    return f"a {type(a).__name__}"


def _first_bad_indices(idx: np.ndarray, n: int):
    """``(row, what)`` of the first row of the host int array ``idx`` with an index outside
    ``[0, n)`` or repeated, else ``None``."""
    out = (idx < 0) | (idx >= n)
    if out.any():
        r, c = np.argwhere(out)[0]
        return int(r), f"index {int(idx[r, c])}"
    s = np.sort(idx, axis=1)
    dup = s[:, 1:] == s[:, :-1]
    if dup.any():
        r, c = np.argwhere(dup)[0]
        return int(r), f"index {int(s[r, c])} repeated {int((idx[r] == s[r, c]).sum())} times"
    return None


def check_indices(guard: Guarded, label: str, idx, xp, shape: tuple, n: int, context, due: bool) -> None:
    """``idx``, a policy's ``label`` (``""`` for ``select``'s return, ``"idx"`` for ``replace``'s),
    an integer array of ``xp`` of ``shape`` with values in ``[0, n)``, none repeated on an island
    (the values read where ``due``).

    Raises:
        PolicyError: naming the policy, ``label`` and what was expected.
    """
    what = f"{label} " if label else ""
    expected = (
        f"{what}(I, K) = {shape} integer positions in [0, {n}) without repeats"
        if label
        else f"(I, k) = {shape} integer indices in [0, {n}) without repeats"
    )
    if not _is_array(idx, xp):
        guard.fail(f"{what}as {_kind(idx, xp)}" if label else _kind(idx, xp), expected)
    if tuple(idx.shape) != shape:
        guard.fail(f"{what}of shape {_shape(idx)}" if label else f"shape {_shape(idx)}", expected)
    if idx.dtype.kind not in "iu":
        guard.fail(f"{what}of dtype {idx.dtype}" if label else f"dtype {idx.dtype}", expected)
    if due and shape[1]:
        bad = _first_bad_indices(to_host(idx).astype(np.int64), n)
        if bad is not None:
            guard.fail(
                f"{what}with {bad[1]} on {_where(context, bad[0])}"
                if label
                else f"{bad[1]} on {_where(context, bad[0])}",
                expected,
            )


class GuardedSelection(Guarded):
    """A user's ``islands.selection`` whose emigrant indices are checked: an integer array
    ``(I, k)`` with values in ``[0, N)``, none repeated on an island."""

    method, n_args = "select", 3

    def select(self, f, v, k: int, context=None):
        """The policy's ``select(f, v, k[, context])``, checked (:func:`check_indices`).

        Raises:
            PolicyError: the return breaks the contract.
        """
        idx = self._call((f, v, k), context)
        xp, (I, N) = array_module(f), tuple(f.shape)
        check_indices(self, "", idx, xp, (I, int(k)), N, context, self._due(xp, (I, N, int(k))))
        return idx


class GuardedReplacement(Guarded):
    """A user's ``islands.replacement`` whose return is checked: ``(idx, new, accepted, order)``
    with ``idx`` ``(I, K)`` positions in ``[0, N)`` without repeats, ``new`` a Population ``(I,
    K)`` with the residents' leaves, ``accepted`` ``(I, K)`` bool, only for real immigrants, and
    ``order`` ``(I, K)`` a permutation of ``0..K-1`` per island; where nothing is accepted, ``new``
    holds the resident at ``idx`` unchanged."""

    method, n_args = "replace", 3

    def replace(self, residents, immigrants, valid, context=None):
        """The policy's ``replace(residents, immigrants, valid[, context])``, checked.

        Raises:
            PolicyError: the return breaks the contract.
        """
        out = self._call((residents, immigrants, valid), context)
        xp, (I, N), K = residents.xp, residents.shape, immigrants.shape[1]
        expected = "a tuple (idx, new, accepted, order)"
        if not isinstance(out, (tuple, list)):
            self.fail(_kind(out, xp), expected)
        if len(out) != 4:
            self.fail(f"a {type(out).__name__} of {len(out)}", expected)
        idx, new, accepted, order = out
        due = self._due(xp, (I, N, K))
        check_indices(self, "idx", idx, xp, (I, K), N, context, due)
        leaves = list(residents.leaves())
        want = f"new a Population (I, K) = {(I, K)} with the residents' leaves ({', '.join(leaves)})"
        if not callable(getattr(new, "leaves", None)):
            self.fail(f"new as {_kind(new, xp)}", want)
        if sorted(new.leaves()) != sorted(leaves) or tuple(new.shape) != (I, K):
            self.fail(f"new of shape {_shape(new.f)} with leaves ({', '.join(new.leaves())})", want)
        want = f"accepted (I, K) = {(I, K)} bool"
        if not _is_array(accepted, xp) or tuple(accepted.shape) != (I, K) or accepted.dtype != bool:
            got = _kind(accepted, xp) if not _is_array(accepted, xp) else f"shape {_shape(accepted)} {accepted.dtype}"
            self.fail(f"accepted as {got}", want)
        want = f"order (I, K) = {(I, K)} integer, a permutation of 0..{K - 1} on each island"
        if not _is_array(order, xp) or tuple(order.shape) != (I, K) or order.dtype.kind not in "iu":
            got = _kind(order, xp) if not _is_array(order, xp) else f"shape {_shape(order)} {order.dtype}"
            self.fail(f"order as {got}", want)
        if due and K:
            self._check_values(residents, valid, idx, new, accepted, order, context)
        return out

    def _check_values(self, residents, valid, idx, new, accepted, order, context) -> None:
        """The values of a return whose shapes passed (host copies)."""
        K = int(order.shape[1])
        o = to_host(order).astype(np.int64)
        bad = ~(np.sort(o, axis=1) == np.arange(K)).all(axis=1)
        if bad.any():
            r = int(np.argmax(bad))
            self.fail(
                f"order {o[r].tolist()} on {_where(context, r)}",
                f"order (I, K) a permutation of 0..{K - 1} on each island",
            )
        acc = to_host(accepted)
        padding = acc & ~np.take_along_axis(to_host(valid), o, axis=1)
        if padding.any():
            r, c = (int(x) for x in np.argwhere(padding)[0])
            self.fail(
                f"accepted[{r}, {c}] True for a padding slot (valid[order] False) on {_where(context, r)}",
                "accepted only for real immigrants",
            )
        before, after = residents.take(idx).leaves(), new.leaves()
        for name, a in before.items():
            a, b = to_host(a), to_host(after[name])
            keep = ~acc.reshape(acc.shape + (1,) * (a.ndim - 2))
            same = (a == b) | ((a != a) & (b != b)) if a.dtype.kind in "fc" else a == b
            changed = keep & ~same if a.shape == b.shape else keep
            if changed.any():
                r, c = (int(x) for x in np.argwhere(changed.reshape(acc.shape + (-1,)).any(axis=-1))[0])
                self.fail(
                    f"new.{name} changed at idx[{r}, {c}] where accepted is False ({_where(context, r)})",
                    "new to hold the resident at idx unchanged where an immigrant is not accepted",
                )
