"""Problems defined outside isles, plugged in through ``problem._target_`` in tests."""

import numpy as np
from array_api_compat import array_namespace
from isles.problems.base import Problem, ScalableProblem


class ShiftedSphere(Problem):
    """A user's own problem: sphere shifted to 0.5 with one constraint ``x1 >= 0.25``."""

    name = "shifted_sphere"
    n_constraints = 1

    def __init__(self, dim=3, lower=-1.0, upper=1.0):
        super().__init__(dim, lower, upper, f_star=0.0)

    def objective(self, X):
        return ((X - 0.5) ** 2).sum(axis=-1)

    def constraints(self, X):
        return 0.25 - X[..., :1]


class NaNSphere(Problem):
    """Sphere that returns NaN wherever x1 > 0.5 (exercises the NaN treatment)."""

    name = "nan_sphere"

    def __init__(self, dim=2):
        super().__init__(dim, -1.0, 1.0, f_star=0.0)

    def objective(self, X):
        f = (X**2).sum(axis=-1)
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
        return (X**2).sum(axis=-1)


class SlowToRead(RuntimeError):
    """A user's error that takes half a second to unpickle (a large payload, say): while the
    driver reads one actor's, the other actors' errors arrive."""

    def __reduce__(self):
        return (_slow_to_read, (str(self),))


def _slow_to_read(message: str) -> SlowToRead:
    import time

    time.sleep(0.5)
    return SlowToRead(message)


class FailingTogether(FailingSphere):
    """:class:`FailingSphere` in several processes (a run's actors) that fail together with a
    :class:`SlowToRead`: at its failure point each process leaves a file in the folder
    ``barrier`` and raises once ``peers`` processes have (or after 10 s), so that every actor's
    error reaches the driver while it reads the first one."""

    def __init__(self, dim=2, fail_after=30, barrier="", peers=2):
        super().__init__(dim, fail_after)
        self.barrier, self.peers = barrier, peers

    def objective(self, X):
        import os
        import time

        type(self).calls += 1
        if type(self).calls > self.fail_after:
            open(os.path.join(self.barrier, str(os.getpid())), "w").close()
            deadline = time.monotonic() + 10
            while len(os.listdir(self.barrier)) < self.peers and time.monotonic() < deadline:
                time.sleep(0.001)
            raise SlowToRead("objective crashed (test)")
        return (X**2).sum(axis=-1)


class SlowSphere(Problem):
    """Sphere whose evaluation sleeps ``delay_s`` seconds (a run long enough to be interrupted)."""

    name = "slow_sphere"

    def __init__(self, dim=4, delay_s=0.004):
        super().__init__(dim, -1.0, 1.0, f_star=0.0)
        self.delay_s = delay_s

    def objective(self, X):
        import time

        time.sleep(self.delay_s)
        return (X**2).sum(axis=-1)


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
        return (X**2).sum(axis=-1)


class PressureVessel(Problem):
    """A user's constrained engineering problem written as array code (no ``cuda_objective``): the
    pressure vessel of Sandgren (1990) / Kannan & Kramer (1994) in its continuous form,
    ``x = (T_s, T_h, R, L)``, four constraints ``g <= 0``; best known f ~ 6059.7 (integer-multiple
    thicknesses) or 5885.33 (continuous). ``dim``, ``lower``, ``upper`` as a config sets them
    (``++problem.dim=...``); a ``dim`` other than 4 fails at the first evaluation (issue 16)."""

    name = "pressure_vessel"
    n_constraints = 4

    def __init__(self, dim=4, lower=(0.0, 0.0, 10.0, 10.0), upper=(99.0, 99.0, 200.0, 200.0)):
        super().__init__(dim, lower, upper, constraint_scale=[1.0, 1.0, 1296000.0, 240.0])

    def objective(self, X):
        x1, x2, x3, x4 = X[..., 0], X[..., 1], X[..., 2], X[..., 3]
        return 0.6224 * x1 * x3 * x4 + 1.7781 * x2 * x3**2 + 3.1661 * x1**2 * x4 + 19.84 * x1**2 * x3

    def constraints(self, X):
        from array_api_compat import array_namespace

        xp = array_namespace(X)
        x1, x2, x3, x4 = X[..., 0], X[..., 1], X[..., 2], X[..., 3]
        pi = 3.141592653589793
        g = [-x1 + 0.0193 * x3, -x2 + 0.00954 * x3, -pi * x3**2 * x4 - 4.0 / 3.0 * pi * x3**3 + 1296000.0, x4 - 240.0]
        return xp.stack(g, axis=-1)


class HostSyncSphere(Problem):
    """Capture-unsafe (a host synchronisation): normalises by ``float(X.max())``."""

    name = "host_sync_sphere"

    def __init__(self, dim=4):
        super().__init__(dim, -1.0, 1.0, f_star=0.0)

    def objective(self, X):
        scale = float(abs(X).max()) + 1.0  # a device -> host copy: not allowed in a CUDA graph
        return (X**2).sum(axis=-1) / scale


class MaskedSphere(Problem):
    """Capture-unsafe (a data-dependent shape): boolean-mask indexing."""

    name = "masked_sphere"

    def __init__(self, dim=4):
        super().__init__(dim, -1.0, 1.0, f_star=0.0)

    def objective(self, X):
        f = (X**2).sum(axis=-1)
        bad = f[f > 1.0]  # shape depends on the data: needs the count on the host
        return f + 0.0 * bad.sum()


class CountingSphere(Problem):
    """Capture-unsafe (a Python side effect that changes results): adds its call count."""

    name = "counting_sphere"

    def __init__(self, dim=4):
        super().__init__(dim, -1.0, 1.0, f_star=0.0)
        self.calls = 0

    def objective(self, X):
        self.calls += 1
        return (X**2).sum(axis=-1) + 1e-3 * self.calls


class FusedPressureVessel(PressureVessel):
    """The same pressure vessel with ``cuda_objective`` added (the fused contract of
    :class:`isles.problems.base.Problem`): each coordinate folds into its own sum slot, then
    ``obj_final``/``obj_violation`` evaluate the closed form from the four slots. Every family's
    fused kernels then evaluate it inside their generation."""

    name = "pressure_vessel_fused"
    cuda_objective = r"""
#define OBJ_NACC 4
#define OBJ_HAS_V 1
#define OBJ_NEXT 0
ISLES_DEV void obj_init(T* acc) { acc[0] = (T)0; acc[1] = (T)0; acc[2] = (T)0; acc[3] = (T)0; }
ISLES_DEV void obj_merge(T* acc, const T* o) {
    acc[0] += o[0]; acc[1] += o[1]; acc[2] += o[2]; acc[3] += o[3];
}
ISLES_DEV void obj_term(T* acc, T x, T x_next, int j) {   // slot j holds x_j (D = 4)
    if (j == 0) acc[0] += x; else if (j == 1) acc[1] += x; else if (j == 2) acc[2] += x; else acc[3] += x;
}
ISLES_DEV T obj_final(const T* a, int n) {
    const T x1 = a[0], x2 = a[1], x3 = a[2], x4 = a[3];
    return (T)0.6224 * x1 * x3 * x4 + (T)1.7781 * x2 * (x3 * x3) + (T)3.1661 * (x1 * x1) * x4
           + (T)19.84 * (x1 * x1) * x3;
}
ISLES_DEV T pv_pos(T g) { return g > (T)0 ? g : (T)0; }
ISLES_DEV T obj_violation(const T* a, int n) {   // sum_i max(0, g_i / scale_i)
    const T x1 = a[0], x2 = a[1], x3 = a[2], x4 = a[3];
    const T pi = (T)3.141592653589793;
    const T g3 = -pi * (x3 * x3) * x4 - (T)4.0 / (T)3.0 * pi * (x3 * x3 * x3) + (T)1296000.0;
    return pv_pos(-x1 + (T)0.0193 * x3) + pv_pos(-x2 + (T)0.00954 * x3)
           + pv_pos(g3 / (T)1296000.0) + pv_pos((x4 - (T)240.0) / (T)240.0);
}
"""


class FusedNaNSphere(ScalableProblem):
    """A user's sphere whose value is NaN where ``x_0 > 0.5`` (array code and fused source agree)."""

    name = "test_nan_sphere_half"
    default_bounds = (-1.0, 1.0)
    cuda_objective = r"""#define OBJ_NACC 2
#define OBJ_HAS_V 0
#define OBJ_NEXT 0
ISLES_DEV void obj_init(T* acc) { acc[0] = (T)0; acc[1] = (T)0; }
ISLES_DEV void obj_merge(T* acc, const T* o) { acc[0] += o[0]; acc[1] += o[1]; }
ISLES_DEV void obj_term(T* acc, T x, T x_next, int j) { (void)x_next; acc[0] += x * x; if (j == 0) acc[1] += x; }
ISLES_DEV T obj_final(const T* acc, int n) { (void)n; return acc[1] > (T)0.5 ? (acc[0] - acc[0]) / (acc[0] - acc[0]) : acc[0]; }
"""

    def objective(self, X):
        f = (X * X).sum(axis=-1)
        return np.where(X[..., 0] > 0.5, np.nan, f)


class InfiniteSphere(Problem):
    """A user's objective that is never finite (``inf`` everywhere), with ``n_constraints``
    constraints ``x_i - bound <= 0`` (none by default): the result's label says that ``f`` is not
    finite, and ``INFEASIBLE`` only where a constraint is violated (issue 25)."""

    name = "infinite_sphere"

    def __init__(self, dim=2, n_constraints=0, bound=1.0):
        self.n_constraints = int(n_constraints)
        self.bound = float(bound)
        super().__init__(dim, -1.0, 1.0)

    def objective(self, X):
        return (X**2).sum(axis=-1) + np.inf

    def constraints(self, X):
        return X[..., : self.n_constraints] - self.bound


class G11(Problem):
    """A user's problem with an equality constraint: CEC 2006 g11 (Liang et al. 2006), D = 2::

        min f = x1^2 + (x2 - 1)^2   s.t.   h = x1^2 - x2 = 0,   -1 <= x1, x2 <= 1

    f* = 0.7499 (CEC 2006, within eq_tol = 1e-4) at x = (+-1/sqrt(2), 1/2). ``n_eq = 1``: the
    one constraint column is the equality ``h``. CEC writes ``h = x2 - x1^2``; the sign is
    flipped here so that ``h <= 0`` (what a raw ``h`` meant before equalities) holds at the
    unconstrained optimum (0, 1), f = 0: a solver that reads ``h`` as an inequality finds f = 0. ``cuda_row`` is the per-row contract (raw ``h``;
    the kernel turns it into ``|h| - eq_tol``), the array code's operations in the same order.
    """

    name = "g11"
    n_constraints = 1
    n_eq = 1

    cuda_row = r"""
#define ROW_M 1
ISLES_DEV T row_objective(const T* x) {
    const T d = sub_rn(x[1], (T)1.0);
    return add_rn(mul_rn(x[0], x[0]), mul_rn(d, d));
}
ISLES_DEV T row_constraint(const T* x, int i) {
    (void)i;
    return sub_rn(mul_rn(x[0], x[0]), x[1]);
}
"""

    def __init__(self, dim=2, lower=-1.0, upper=1.0):
        if dim != 2:
            raise ValueError(f"problem.dim={dim}: G11 has 2 variables")
        super().__init__(dim, lower, upper, f_star=0.7499)

    def objective(self, X):
        d = X[..., 1] - 1.0
        return X[..., 0] * X[..., 0] + d * d

    def constraints(self, X):
        return (X[..., 0] * X[..., 0] - X[..., 1])[..., None]


class SphereOnPlane(Problem):
    """A user's problem whose objective and equality are sums over the coordinates, carried as a
    fused objective (``cuda_objective``)::

        min f = sum x_i^2   s.t.   g = x_1 - 0.9 <= 0,   h = sum x_i - 1 = 0,   -1 <= x_i <= 1

    f* = 1/D at x_i = 1/D (g holds for D >= 2). ``n_eq = 1`` (the last column, ``h``);
    ``obj_violation`` adds ``max(0, |h| - eq_tol)`` with the instance's ``eq_tol`` baked in, as
    the contract asks.
    """

    name = "sphere_on_plane"
    n_constraints = 2
    n_eq = 1

    def __init__(self, dim=8, lower=-1.0, upper=1.0):
        super().__init__(dim, lower, upper, f_star=1.0 / dim)

    def objective(self, X):
        return (X * X).sum(axis=-1)

    def constraints(self, X):
        xp = array_namespace(X)
        out = xp.empty(X.shape[:-1] + (2,), dtype=X.dtype)
        out[..., 0] = X[..., 0] - 0.9
        out[..., 1] = X.sum(axis=-1) - 1.0
        return out

    @property
    def cuda_objective(self) -> str:
        """acc = (sum x^2, sum x, x_1); ``eq_tol`` baked in as ``SOP_EQ_TOL``."""
        return (
            f"#define SOP_EQ_TOL ((T){float(self.eq_tol)!r})\n"
            + r"""
#define OBJ_NACC 3
#define OBJ_HAS_V 1
#define OBJ_NEXT 0
ISLES_DEV void obj_init(T* acc) { acc[0] = (T)0; acc[1] = (T)0; acc[2] = (T)0; }
ISLES_DEV void obj_merge(T* acc, const T* o) {
    acc[0] = add_rn(acc[0], o[0]); acc[1] = add_rn(acc[1], o[1]); acc[2] = add_rn(acc[2], o[2]);
}
ISLES_DEV void obj_term(T* acc, T x, T x_next, int j) {
    (void)x_next;
    acc[0] = add_rn(acc[0], mul_rn(x, x));
    acc[1] = add_rn(acc[1], x);
    if (j == 0) acc[2] = x;
}
ISLES_DEV T obj_final(const T* acc, int n) { (void)n; return acc[0]; }
ISLES_DEV T obj_violation(const T* acc, int n) {
    (void)n;
    const T g = sub_rn(acc[2], (T)0.9);
    const T h = sub_rn(t_abs(sub_rn(acc[1], (T)1.0)), SOP_EQ_TOL);
    const T vg = g > (T)0 ? g : (T)0, vh = h > (T)0 ? h : (T)0;
    return add_rn(vg, vh);
}
"""
        )


class TimedSphere(Problem):
    """Sphere whose evaluation costs ``row_s`` seconds per row (slept: a group of more islands costs
    more) and logs each call as ``pid start end`` (``time.time()``, seconds) to ``log_dir/PID.log``:
    an objective whose busy intervals a test reads per process (``log_dir`` null: no log)."""

    name = "timed_sphere"

    def __init__(self, dim=4, row_s=0.0005, log_dir=None):
        super().__init__(dim, -1.0, 1.0, f_star=0.0)
        self.row_s, self.log_dir = row_s, log_dir

    def objective(self, X):
        import os
        import time

        t0 = time.time()
        time.sleep(self.row_s * int(np.prod(X.shape[:-1])))
        f = (X**2).sum(axis=-1)
        if self.log_dir:
            with open(os.path.join(self.log_dir, f"{os.getpid()}.log"), "a") as out:
                out.write(f"{os.getpid()} {t0!r} {time.time()!r}\n")
        return f


class BusyDesign(Problem):
    """An expensive objective as a user writes one: a Python loop over the batch, each design busy for
    ``cost_s`` seconds of CPU (spinning on the clock, no sleep: it holds a core as a simulation does),
    then the sphere."""

    name = "busy_design"

    def __init__(self, dim=4, cost_s=0.005):
        super().__init__(dim, -1.0, 1.0, f_star=0.0)
        self.cost_s = float(cost_s)

    def objective(self, X):
        import time

        flat = np.asarray(X).reshape(-1, X.shape[-1])
        out = np.empty(len(flat))
        for i, x in enumerate(flat):
            end = time.perf_counter() + self.cost_s
            while time.perf_counter() < end:
                pass
            out[i] = float((x**2).sum())
        return out.reshape(X.shape[:-1])


class GateSphere(Problem):
    """Sphere whose evaluation, after ``after`` calls, waits until the file ``gate`` exists: a run that a
    test holds in the middle (to kill its tracking process there, tests/test_tracking_journal.py). The
    file ``gate.held`` says that the run is held there (a test waits for it: an event, not a delay)."""

    name = "gate_sphere"
    calls = 0

    def __init__(self, dim=2, gate="gate", after=5):
        super().__init__(dim, -1.0, 1.0, f_star=0.0)
        self.gate, self.after = gate, after

    def objective(self, X):
        import os
        import time

        type(self).calls += 1
        if type(self).calls > self.after and not os.path.exists(self.gate):
            open(f"{self.gate}.held", "w").close()
        while type(self).calls > self.after and not os.path.exists(self.gate):
            time.sleep(0.02)
        return (X**2).sum(axis=-1)


class HeldSphere(TimedSphere):
    """:class:`TimedSphere` whose process that evaluates batches of ``hold_islands`` islands holds its
    first generation (its call after the initial population's) until another process has logged
    ``until`` calls, or ``hold_s`` seconds have passed (a hang guard, not a measure); it then writes
    ``released SEEN`` (the most calls another process had logged; under ``until``: the guard ran
    out) to ``log_dir/held``. A test holds one actor this way and reads what the others did
    meanwhile: an order of events, which the machine's load cannot change."""

    name = "held_sphere"

    def __init__(self, dim=4, row_s=0.0005, log_dir=None, hold_islands=2, until=1, hold_s=300.0):
        super().__init__(dim, row_s, log_dir)
        self.hold_islands, self.until, self.hold_s = hold_islands, until, hold_s

    def calls(self) -> dict:
        """``{pid: calls logged}`` of every process that evaluated so far."""
        from pathlib import Path

        return {int(path.stem): path.read_text().count("\n") for path in Path(self.log_dir).glob("*.log")}

    def objective(self, X):
        import os
        import time

        if X.ndim == 3 and X.shape[0] == self.hold_islands and self.calls().get(os.getpid()) == 1:
            deadline, seen = time.monotonic() + self.hold_s, 0
            while True:
                seen = max([n for pid, n in self.calls().items() if pid != os.getpid()], default=0)
                if seen >= self.until or time.monotonic() > deadline:
                    break
                time.sleep(0.01)
            with open(os.path.join(self.log_dir, "held"), "w") as out:
                out.write(f"released {seen}\n")
        return super().objective(X)
