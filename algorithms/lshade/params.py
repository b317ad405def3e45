"""The parameters of L-SHADE (:class:`LSHADEParams`, Tanabe & Fukunaga 2014, Section IV) and its
linear population size reduction (:func:`population_at`, eq. 10); :mod:`isles.algorithms.lshade.lshade`
re-exports both."""

from __future__ import annotations

from dataclasses import dataclass

from isles.algorithms.core.base import check_bool, check_range
from isles.algorithms.core.host_build import check_host_kernel
from isles.algorithms.lshade.operators import round_half_up


@dataclass(frozen=True)
class LSHADEParams:
    """Parameters of :class:`LSHADE` (validated on construction; Tanabe & Fukunaga 2014, Section IV).

    Attributes:
        pop_size: ``N_init``, the initial population per island; ``None`` (default):
            ``round(r_N_init · dim)``.
        r_N_init: ``N_init / D`` where ``pop_size`` is ``None`` (paper: 18).
        dim: the problem's dimension ``D`` (the config passes ``${oc.select:problem.dim,null}``),
            needed where ``pop_size`` is ``None``; checked against the problem.
        N_min: the final population (paper: 4), an integer >= 4 and <= ``N_init``.
        r_arc: archive size ``|A| = round(r_arc · N_G)`` (paper: 2.6); 0 disables the archive.
        p: the p-best fraction (paper: 0.11); ``pbest`` among the ``max(round(p N_G), 2)`` best.
        H: memory size (paper: 6).
        max_generations: runtime generations of the run (config: ``${generations}``); with
            ``evals_per_generation`` it sets ``MAX_NFE = N_init + max_generations · E`` of eq. 10.
        evals_per_generation: ``E``, trial evaluations per island and runtime generation;
            ``None`` (default): ``N_init``.
        epoch: on CuPy, run whole L-SHADE generations in the epoch kernel where it applies
            (:mod:`isles.algorithms.lshade.epoch`); ``False`` keeps the array code.
        host_kernel: on NumPy, run whole L-SHADE generations in the epoch kernel's host build
            (the same C text compiled by the system C compiler, :func:`isles.algorithms.lshade.host_epoch.host_plan`):
            ``"auto"`` (default) where it applies (a problem with a ``cuda_objective``,
            float32/float64, ``epoch`` true, a C compiler), else the NumPy array code with a one-line log;
            ``True`` the same, the fallback logged as a warning; ``False`` always the NumPy
            array code. The host build gives the GPU epoch kernel's values (up to the math
            library) and the NumPy twin's up to the math library and the objective's summation
            order (docs/gpu_lshade_cmaes.md).
        max_evaluations: the run's evaluation budget ``stop.max_evaluations`` (config:
            ``${oc.select:stop.max_evaluations,null}``), shared by ``n_islands`` islands: each island
            evaluates at most ``ceil(max_evaluations / n_islands)`` points (:attr:`budget`), the
            last runtime generation only what is left, and ``MAX_NFE`` is at most that (LPSR
            reaches ``N_min`` at the island's last evaluation); ``None``: no cap.
        n_islands: the islands that share ``max_evaluations`` (config: ``${islands.n}``).

    Raises:
        ValueError: one line naming the field (``algorithm.<field>``) and the allowed values.
    """

    pop_size: int | None = None
    r_N_init: float = 18.0
    dim: int | None = None
    N_min: int = 4
    r_arc: float = 2.6
    p: float = 0.11
    H: int = 6
    max_generations: int = 1000
    evals_per_generation: int | None = None
    epoch: bool = True
    host_kernel: bool | str = "auto"
    max_evaluations: int | None = None
    n_islands: int = 1

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "r_N_init", check_range("algorithm.r_N_init", self.r_N_init, 0, lo_open=True))
        if self.dim is not None:
            set_(self, "dim", check_range("algorithm.dim", self.dim, 1, integer=True))
        set_(self, "N_min", check_range("algorithm.N_min", self.N_min, 4, integer=True))
        if self.pop_size is None:
            if self.dim is None:
                raise ValueError(
                    "algorithm.pop_size=None: allowed values are integers >= algorithm.N_min, or null with "
                    "algorithm.dim set (N_init = round(r_N_init * dim))"
                )
            if round_half_up(self.r_N_init * self.dim) < self.N_min:
                raise ValueError(
                    f"algorithm.r_N_init={self.r_N_init}: allowed values are numbers >= "
                    f"{self.N_min / self.dim} (round(r_N_init * dim) >= algorithm.N_min={self.N_min})"
                )
        else:
            set_(self, "pop_size", check_range("algorithm.pop_size", self.pop_size, self.N_min, integer=True))
        set_(self, "r_arc", check_range("algorithm.r_arc", self.r_arc, 0))
        set_(self, "p", check_range("algorithm.p", self.p, 0, 1, lo_open=True))
        set_(self, "epoch", check_bool("algorithm.epoch", self.epoch))
        check_host_kernel(self.host_kernel)
        set_(self, "H", check_range("algorithm.H", self.H, 1, integer=True))
        set_(self, "max_generations", check_range("algorithm.max_generations", self.max_generations, 1, integer=True))
        if self.evals_per_generation is not None:
            set_(
                self,
                "evals_per_generation",
                check_range("algorithm.evals_per_generation", self.evals_per_generation, 1, integer=True),
            )
        if self.max_evaluations is not None:
            set_(
                self, "max_evaluations", check_range("algorithm.max_evaluations", self.max_evaluations, 1, integer=True)
            )
        set_(self, "n_islands", check_range("algorithm.n_islands", self.n_islands, 1, integer=True))

    @property
    def n_init(self) -> int:
        """``N_init``: ``pop_size``, or ``round(r_N_init · dim)``."""
        return self.pop_size if self.pop_size is not None else round_half_up(self.r_N_init * self.dim)

    @property
    def E(self) -> int:
        """Trial evaluations per island and runtime generation."""
        return self.evals_per_generation if self.evals_per_generation is not None else self.n_init

    @property
    def budget(self) -> int | None:
        """Evaluations per island at most: ``ceil(max_evaluations / n_islands)``; ``None`` without a budget."""
        return None if self.max_evaluations is None else -(-self.max_evaluations // self.n_islands)

    @property
    def max_nfe(self) -> int:
        """``MAX_NFE`` of eq. 10: ``N_init + max_generations · E`` evaluations per island, at most
        :attr:`budget` (at least ``N_init``)."""
        nfe = self.n_init + self.max_generations * self.E
        return nfe if self.budget is None else max(self.n_init, min(nfe, self.budget))

    def evaluations_left(self, evals: int) -> int:
        """Trial evaluations of the next runtime generation after ``evals`` per island: ``E``, or
        what is left of :attr:`budget` (0 once it is spent)."""
        return self.E if self.budget is None else max(0, min(self.E, self.budget - int(evals)))

    @property
    def archive_capacity(self) -> int:
        """Rows of the archive array: ``round(r_arc · N_init)`` (the largest ``|A|``)."""
        return round_half_up(self.r_arc * self.n_init)


def population_at(params: LSHADEParams, nfe: int) -> int:
    """LPSR, eq. 10: ``N_{G+1} = round((N_min - N_init) / MAX_NFE · NFE + N_init)``, in exact integer
    arithmetic (half rounds up), at least ``N_min``.

    Args:
        params: the parameters (``N_init``, ``N_min``, ``MAX_NFE``).
        nfe: evaluations per island so far (initialisation included), a host int ``>= 0``.
    """
    n0, nmin, m = params.n_init, params.N_min, params.max_nfe
    num = n0 * m - (n0 - nmin) * int(nfe)  # (N_init + (N_min - N_init) nfe / MAX_NFE) * MAX_NFE
    return max(nmin, (2 * num + m) // (2 * m))
