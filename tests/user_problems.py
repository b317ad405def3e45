"""Problems defined outside isles, plugged in through ``problem._target_`` in tests."""
import numpy as np

from isles.problems.base import Problem


class ShiftedSphere(Problem):
    """A user's own problem: sphere shifted to 0.5 with one constraint ``x1 >= 0.25``."""

    name = "shifted_sphere"
    n_constraints = 1

    def __init__(self, dim=3, lower=-1.0, upper=1.0):
        super().__init__(dim, lower, upper, f_star=0.0)

    def objective(self, X):
        return ((X - 0.5) ** 2).sum(axis=-1)

    def constraints(self, X):
        return (0.25 - X[..., :1])


class NaNSphere(Problem):
    """Sphere that returns NaN wherever x1 > 0.5 (exercises the NaN treatment)."""

    name = "nan_sphere"

    def __init__(self, dim=2):
        super().__init__(dim, -1.0, 1.0, f_star=0.0)

    def objective(self, X):
        f = (X ** 2).sum(axis=-1)
        return np.where(X[..., 0] > 0.5, np.nan, f) if isinstance(f, np.ndarray) else f


class FailingSphere(Problem):
    """Sphere whose evaluation raises ``error`` (a builtin exception's name) after a few calls
    (a run that fails after it started)."""

    name = "failing_sphere"
    calls = 0

    def __init__(self, dim=2, fail_after=30, error="RuntimeError"):
        super().__init__(dim, -1.0, 1.0)
        self.fail_after = fail_after
        self.error = error

    def objective(self, X):
        import builtins

        type(self).calls += 1
        if type(self).calls > self.fail_after:
            raise getattr(builtins, self.error)("objective crashed (test)")
        return (X ** 2).sum(axis=-1)


class SlowSphere(Problem):
    """Sphere whose evaluation sleeps ``delay_s`` seconds (a run long enough to be interrupted)."""

    name = "slow_sphere"

    def __init__(self, dim=4, delay_s=0.004):
        super().__init__(dim, -1.0, 1.0, f_star=0.0)
        self.delay_s = delay_s

    def objective(self, X):
        import time

        time.sleep(self.delay_s)
        return (X ** 2).sum(axis=-1)


from isles.problems.minmax import MinMaxProblem  # noqa: E402


class UserSaddle(MinMaxProblem):
    """A user's own min-max problem: ``L = sum (x - 0.3)^2 - sum (y + 0.2)^2 + x . y`` is convex in
    x, concave in y (saddle where ``2 (x - 0.3) + y = 0`` and ``x - 2 (y + 0.2) = 0``)."""

    name = "user_saddle"

    def __init__(self, dim=2):
        super().__init__(dim, -1.0, 1.0, dim, -1.0, 1.0)

    def payoff(self, X, Y):
        a = ((X - 0.3) ** 2).sum(axis=-1)[..., :, None]
        b = ((Y + 0.2) ** 2).sum(axis=-1)[..., None, :]
        return a - b + X @ Y.swapaxes(-1, -2)


class BadPayoff(UserSaddle):
    """A min-max problem whose payoff forgets the pair axis: returns ``(..., Nx)``."""

    name = "bad_payoff"

    def payoff(self, X, Y):
        return (X ** 2).sum(axis=-1)
