"""A user's migration policies, plugged in through the config (issue 26 item 3):
``islands.replacement={_target_: tests.migration_policies.RejectAll}``,
``islands.selection={_target_: tests.migration_policies.SelectWorst}``. Each is one class with one
method of array code over ``xp`` (NumPy or CuPy), without host synchronisation."""

from isles.islands.migration.policies import Replacement, Selection, rank_order, worst_first


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
