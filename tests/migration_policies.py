"""A user's migration policies, plugged in through the config (issue 26 item 3):
``islands.replacement={_target_: tests.migration_policies.RejectAll}``,
``islands.selection={_target_: tests.migration_policies.SelectWorst}``. Each is one class with one
method of array code over ``xp`` (NumPy or CuPy), without host synchronisation. And a user's
topology, ``topology={_target_: tests.migration_policies.Chain}`` (issue 34)."""

import numpy as np
from isles.islands.migration.policies import Replacement, Selection, rank_order, worst_first
from isles.islands.migration.topology import Topology


class RejectAll(Replacement):
    """Accepts no immigrant: every island keeps its residents (they are written back unchanged)."""

    def replace(self, residents, immigrants, valid):
        """As :meth:`isles.islands.migration.policies.Replacement.replace`, with ``accepted`` all False."""
        idx, imm, res, valid, order = worst_first(residents, immigrants, valid)
        accepted = residents.xp.zeros_like(valid)
        return idx, imm.where(accepted, res), accepted, order


class SelectWorst(Selection):
    """The ``k`` worst individuals of each island emigrate, worst first."""

    def select(self, f, v, k):
        """Indices ``(I, k)`` of the ``k`` worst of each island under Deb's rules."""
        return rank_order(f, v)[:, ::-1][:, :k]


class NoMethod:
    """Not a policy: it has neither ``select`` nor ``replace`` (a test of the config's check)."""

    def __init__(self, size: int = 1):
        self.size = size


class SelectRandom(Selection):
    """``k`` distinct individuals of each island at random, from the context's counter-based
    generator (:class:`isles.islands.migration.contract.MigrationContext`): the same emigrants
    whatever the grouping of the islands."""

    def select(self, f, v, k, context):
        """Indices ``(I, k)``: the first ``k`` of a random permutation of each island's ``N``."""
        return context.xp.argsort(context.uniform(f.shape[1]), axis=1)[:, :k]


class ReplaceRandom(Replacement):
    """Immigrants (best first) overwrite residents at random places, unconditionally, from the
    context's generator (a ``replace`` that takes a context)."""

    def replace(self, residents, immigrants, valid, context):
        """As :meth:`isles.islands.migration.policies.Replacement.replace`: ``idx`` the first ``K``
        of a random permutation of each island's residents, every real immigrant accepted."""
        _, imm, _, valid, order = worst_first(residents, immigrants, valid)
        xp, K = context.xp, immigrants.shape[1]
        idx = xp.argsort(context.uniform(residents.shape[1]), axis=1)[:, :K]
        return idx, imm.where(valid, residents.take(idx)), valid, order


# -- policies that break their contract (tests/test_policy_contract.py) -------------------------
class SelectTooMany(Selection):
    """Returns ``k + 3`` indices per island instead of ``k``."""

    def select(self, f, v, k):
        """Indices ``(I, k + 3)``: the contract asks for ``(I, k)``."""
        return rank_order(f, v)[:, : k + 3]


class SelectOutOfRange(Selection):
    """Returns index ``N`` (one past the last individual)."""

    def select(self, f, v, k):
        """Indices ``(I, k)`` all equal to ``N``."""
        return rank_order(f, v)[:, :k] * 0 + f.shape[1]


class SelectFloat(Selection):
    """Returns float indices."""

    def select(self, f, v, k):
        """The best ``k`` as float64."""
        return rank_order(f, v)[:, :k].astype(float)


class ReplaceAtZero(Replacement):
    """Writes every immigrant at index 0 and accepts each one."""

    def replace(self, residents, immigrants, valid):
        """``idx`` all 0: at most one immigrant can land per island."""
        _, imm, _, valid, order = worst_first(residents, immigrants, valid)
        idx = residents.xp.zeros(valid.shape, dtype=residents.xp.int64)
        return idx, imm, valid, order


class ReplaceWrongShape(Replacement):
    """Returns ``new`` with one immigrant fewer than ``idx`` has places."""

    def replace(self, residents, immigrants, valid):
        """The built-ins' pairing (``replace_worst``) with the last column of ``new`` dropped."""
        idx, imm, res, valid, order = worst_first(residents, immigrants, valid)
        return idx, imm.where(valid, res).map(lambda a: a[:, :-1]), valid, order


class Chain(Topology):
    """A user's topology: the one-way chain ``0 -> 1 -> ... -> n - 1`` (no edge back to 0), every
    edge with probability ``weight``."""

    def __init__(self, weight: float = 1.0):
        self.weight = float(weight)

    def weights(self, n: int) -> np.ndarray:
        """``W (n, n)`` with ``W[i, i + 1] = weight``."""
        W = np.zeros((n, n))
        W[np.arange(n - 1), np.arange(1, n)] = self.weight
        return W
