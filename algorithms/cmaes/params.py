"""The parameters of the batched CMA-ES (:class:`isles.algorithms.cmaes.cmaes.CMAES`), validated
on construction; ``conf/algorithm/cmaes.yaml`` sets them (docs/cmaes.md)."""

from __future__ import annotations

from dataclasses import dataclass

from isles.algorithms.cmaes.strategy import default_pop_size
from isles.algorithms.core.base import check_range
from isles.algorithms.de.de import BOUND_HANDLINGS

RESTARTS = ("none", "ipop", "bipop")


@dataclass(frozen=True)
class CMAESParams:
    """Parameters of :class:`isles.algorithms.cmaes.cmaes.CMAES` (validated on construction).

    Attributes:
        dim: the problem's dimension ``n`` (the config reads ``problem.dim``; ``null`` where the
            problem's config has none, e.g. ``problem=welded_beam``: then ``pop_size`` must be
            set): the default population and the evaluations per generation depend on it.
        pop_size: ``lambda_start``, the population of the first run and the block evaluated per
            generation (>= 4); ``null``: the tutorial's ``4 + floor(3 ln n)``.
        sigma0: initial step size relative to the box, ``sigma_0 = sigma0 * rms(upper - lower)``
            (> 0); the initial covariance is ``diag(((upper - lower) / rms(upper - lower))^2)``, so
            the initial distribution has standard deviation ``sigma0 (upper_i - lower_i)`` on
            coordinate ``i``. Hansen's advice: about a third of the box (0.3).
        restarts: ``none``, ``ipop`` (Auger & Hansen 2005) or ``bipop`` (Hansen 2009).
        max_doublings: IPOP's doublings the buffers hold: ``lambda_cap = pop_size 2^max_doublings``
            (integer in ``[0, 20]``; Hansen 2009 uses up to 9; unused with ``restarts=none``). Cost per generation and island
            ``O(lambda_cap D^2)``, memory ``O(lambda_cap D)``.
        tol_fun: TolFun (restart when the best values of the last ``10 + ceil(30 n / lambda)``
            iterations and all of the current one lie within it), >= 0.
        tol_x: TolX, relative to ``sigma_0`` (restart when ``sigma p_c`` and ``sigma sqrt(C_ii)``
            are all below ``tol_x sigma_0``), >= 0.
        bound_handling: ``reflect`` (default), ``clip`` or ``reinit``
            (:func:`isles.algorithms.de.de.apply_bounds`).
        eigen_interval: generations between eigendecompositions; ``null``: the tutorial's lazy
            rule ``max(1, floor(1 / (10 n (c_1 + c_mu))))`` at ``lambda_start``.
        max_evaluations: the run's evaluation budget ``stop.max_evaluations`` (config:
            ``${oc.select:stop.max_evaluations,null}``), shared by ``n_islands`` islands: each island
            evaluates at most ``ceil(max_evaluations / n_islands)`` points (:attr:`budget`; the
            initial mean included), the last generation only the first samples of its block that
            fit; ``None``: no cap.
        n_islands: the islands that share ``max_evaluations`` (config: ``${islands.n}``).

    Raises:
        ValueError: one line naming the field (``algorithm.<field>``) and the allowed values.
    """

    dim: int | None = None
    pop_size: int | None = None
    sigma0: float = 0.3
    restarts: str = "bipop"
    max_doublings: int = 6
    tol_fun: float = 1e-12
    tol_x: float = 1e-12
    bound_handling: str = "reflect"
    eigen_interval: int | None = None
    max_evaluations: int | None = None
    n_islands: int = 1

    def __post_init__(self):
        set_ = object.__setattr__
        if not isinstance(self.restarts, str) or self.restarts not in RESTARTS:
            raise ValueError(f"algorithm.restarts={self.restarts!r}: allowed values are {'|'.join(RESTARTS)}")
        if not isinstance(self.bound_handling, str) or self.bound_handling not in BOUND_HANDLINGS:
            raise ValueError(
                f"algorithm.bound_handling={self.bound_handling!r}: allowed values are {'|'.join(BOUND_HANDLINGS)}"
            )
        if self.dim is not None:
            set_(self, "dim", check_range("algorithm.dim", self.dim, 1, integer=True))
        elif self.pop_size is None:
            raise ValueError(
                "algorithm.pop_size=None: allowed values are integers >= 4 where algorithm.dim is null "
                "(the problem's config has no dim: set algorithm.pop_size=N or algorithm.dim=D)"
            )
        if self.pop_size is not None:
            set_(self, "pop_size", check_range("algorithm.pop_size", self.pop_size, 4, integer=True))
        set_(self, "sigma0", check_range("algorithm.sigma0", self.sigma0, 0, lo_open=True))
        set_(self, "max_doublings", check_range("algorithm.max_doublings", self.max_doublings, 0, 20, integer=True))
        set_(self, "tol_fun", check_range("algorithm.tol_fun", self.tol_fun, 0))
        set_(self, "tol_x", check_range("algorithm.tol_x", self.tol_x, 0))
        if self.eigen_interval is not None:
            set_(self, "eigen_interval", check_range("algorithm.eigen_interval", self.eigen_interval, 1, integer=True))
        if self.max_evaluations is not None:
            set_(
                self, "max_evaluations", check_range("algorithm.max_evaluations", self.max_evaluations, 1, integer=True)
            )
        set_(self, "n_islands", check_range("algorithm.n_islands", self.n_islands, 1, integer=True))

    @property
    def lam_start(self) -> int:
        """``lambda_start``: ``pop_size``, or the tutorial's default for ``dim``."""
        return int(self.pop_size) if self.pop_size is not None else default_pop_size(self.dim)

    @property
    def lam_cap(self) -> int:
        """``lambda_cap = lambda_start 2^max_doublings``, the largest population the buffers hold
        (``lambda_start`` with ``restarts=none``)."""
        return self.lam_start << (0 if self.restarts == "none" else self.max_doublings)

    @property
    def budget(self) -> int | None:
        """Evaluations per island at most: ``ceil(max_evaluations / n_islands)``; ``None`` without a budget."""
        return None if self.max_evaluations is None else -(-self.max_evaluations // self.n_islands)
