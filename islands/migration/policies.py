"""Migration policies as objects, after pagmo 2's ``s_policy`` and ``r_policy``: one small class
with one method each.

* emigrant selection (``islands.selection``): ``select(f, v, k) -> idx (I, k)``, the residents
  that emigrate (indices along the population axis), e.g. :class:`SelectBest`;
* immigrant replacement (``islands.replacement``): ``replace(residents, immigrants, valid) ->
  (idx, new, accepted, order)``, where the immigrants land, e.g. :class:`FairReplace`,
  :class:`ReplaceWorst`.

A method that takes one more argument, ``context`` (``select(f, v, k, context)``), gets a
:class:`~isles.islands.migration.contract.MigrationContext`: the islands' global ids, generation and
epoch, and a counter-based generator keyed by (seed, island, generation, draw), so that a random
policy does not depend on the grouping of the islands. A user's policy's return is checked at the
first migration (:func:`isles.islands.migration.contract.guarded`); the built-in classes are trusted.

The config names a built-in policy (``islands.replacement=replace_worst``, the names of
:data:`SELECTIONS` and :data:`REPLACEMENTS`) or any class by ``_target_``
(``islands.replacement={_target_: my_module.MyReplace, some_arg: 1}``), built through
:func:`hydra.utils.instantiate` by :func:`selection_policy` / :func:`replacement_policy`; the
schema builds each once before Ray starts, so that a bad value is one line naming the field.

A policy runs inside the epoch, on the device, and on the GPU inside a captured CUDA graph: its
method is array code over ``xp`` (NumPy or CuPy, :attr:`Population.xp` or the arrays' module)
without host synchronisation (no ``float()``, ``.item()``, boolean-mask indexing or shapes that
depend on the data). Policies are plain picklable objects (the island groups build them from the
config in their actors; an object given in a group's spec crosses Ray by pickle).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from isles.algorithms.core.backend import array_module
from isles.algorithms.core.population import Population
from isles.problems.constraints import better


def rank_order(f, v):
    """Indices ``(I, N)`` sorting each island best-first under Deb's rules (stable, lexicographic (v, f))."""
    xp = array_module(f)
    by_f = xp.argsort(f, axis=-1, kind="stable")
    v_sorted = xp.take_along_axis(v, by_f, axis=-1)
    by_v = xp.argsort(v_sorted, axis=-1, kind="stable")
    return xp.take_along_axis(by_f, by_v, axis=-1)


def check_n_migrants(k, n: int, role=None) -> None:
    """``islands.n_migrants`` against the population size ``n`` (known once the algorithm is built;
    ``role``: the population's migration role, ``None`` for an algorithm with one).

    Raises:
        ValueError: ``k`` not an integer in ``1..n``, naming the field and the allowed values.
    """
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n:
        of = "" if role is None else f" of {role}"
        raise ValueError(f"islands.n_migrants={k}: allowed values are integers 1..{n} (the population size{of})")


def check_migrants(k, algorithm) -> None:
    """``islands.n_migrants`` against every population of the built island ``algorithm``
    (:meth:`~isles.algorithms.core.base.IslandAlgorithm.population_sizes`: one per migration role,
    e.g. ``x`` and ``y``), once per run before Ray starts (:func:`isles.app.job.prepare`) and once per
    island group when it builds its selection (:func:`selection_policy`), never per migration.

    Raises:
        ValueError: as :func:`check_n_migrants`.
    """
    sizes = getattr(algorithm, "population_sizes", None)  # an algorithm that is no IslandAlgorithm: one population
    for role, n in (sizes() if sizes else {None: algorithm.population_size()}).items():
        check_n_migrants(k, int(n), role)


class _Stateless:
    """Equality, hash and repr of a policy without parameters."""

    def __eq__(self, other):
        return type(other) is type(self)

    def __hash__(self):
        return hash(type(self))

    def __repr__(self):
        return f"{type(self).__name__}()"


# -- emigrant selection ------------------------------------------------------------------------
class Selection:
    """An emigrant selection policy (``islands.selection``); subclass it, or give any class
    with this method."""

    def select(self, f, v, k: int, context=None):
        """Emigrant indices ``(I, k)`` (int, along the population axis, in ``[0, N)``, distinct
        per island) of islands with fitness ``f (I, N)`` and violation ``v (I, N)`` (device
        arrays); the emigrants go in this order (best first for the built-ins). ``context``: a
        :class:`~isles.islands.migration.contract.MigrationContext` (island ids, generation, epoch,
        generator), given to a method that declares it; leave it out if the policy needs none."""
        raise NotImplementedError


class SelectBest(_Stateless, Selection):
    """The ``k`` best individuals of each island under Deb's rules, best first (``pagmo::select_best``)."""

    def select(self, f, v, k: int, context=None):
        """Indices ``(I, k)`` of the ``k`` best of each island (:func:`rank_order`); ``k`` in
        ``1..N``, checked once when the group built its selection (:func:`check_migrants`);
        ``context`` unused."""
        return rank_order(f, v)[:, :k]


# -- immigrant replacement ---------------------------------------------------------------------
class Replacement:
    """An immigrant replacement policy (``islands.replacement``); subclass it, or give any
    class with this method."""

    def replace(self, residents: Population, immigrants: Population, valid, context=None):
        """Where immigrants go.

        Args:
            residents: the islands' population ``(I, N)``.
            immigrants: ``(I, K)`` with the residents' leaves (:meth:`Population.conform`), ``K <= N``.
            valid: ``(I, K)`` bool, real immigrants (padding is False).
            context: a :class:`~isles.islands.migration.contract.MigrationContext`, given to a
                method that declares it (leave it out if the policy needs none).

        Returns:
            ``(idx (I, K), new (I, K) Population, accepted (I, K) bool, order (I, K))``: write
            ``new`` at ``idx`` (integer positions in ``[0, N)``, distinct per island); where an
            immigrant is not accepted ``new`` holds the resident at ``idx`` unchanged; ``order`` is
            the permutation applied to the immigrants, so ``accepted[i, j]`` refers to immigrant
            ``order[i, j]`` of the input (only a real one, ``valid``, can be accepted).
            :func:`worst_first` gives the pairing of the built-ins.
        """
        raise NotImplementedError


def worst_first(residents: Population, immigrants: Population, valid):
    """The pairing of the built-in replacements: immigrants best-first against residents
    worst-first (pairing them keeps the best ``N`` of the union where only better immigrants
    are accepted). Arguments as :meth:`Replacement.replace`.

    Returns:
        ``(idx (I, K), imm, res, valid, order)``: the ``K`` worst residents' indices (worst
        first), the immigrants in ``order`` (best first; padding last), the residents at
        ``idx``, ``valid`` in ``order``, and ``order (I, K)``.
    """
    xp = residents.xp
    K = immigrants.shape[1]
    imm_order = rank_order(xp.where(valid, immigrants.f, xp.inf), xp.where(valid, immigrants.v, xp.inf))
    imm = immigrants.take(imm_order)
    valid = xp.take_along_axis(valid, imm_order, axis=1)
    idx = rank_order(residents.f, residents.v)[:, ::-1][:, :K]
    res = residents.take(idx)
    return idx, imm, res, valid, imm_order


class FairReplace(_Stateless, Replacement):
    """A resident is replaced only by a better immigrant (Deb's rules): each island keeps the best
    ``N`` of residents plus immigrants (``pagmo::fair_replace``)."""

    def replace(self, residents: Population, immigrants: Population, valid, context=None):
        """As :meth:`Replacement.replace`: the worst residents, worst first (:func:`worst_first`),
        each replaced by its immigrant where that one is better (``context`` unused)."""
        idx, imm, res, valid, order = worst_first(residents, immigrants, valid)
        accepted = valid & better(imm.f, imm.v, res.f, res.v)
        return idx, imm.where(accepted, res), accepted, order


class ReplaceWorst(_Stateless, Replacement):
    """Immigrants overwrite the worst residents unconditionally (pagmo 1's ``worst_r_policy``)."""

    def replace(self, residents: Population, immigrants: Population, valid, context=None):
        """As :meth:`Replacement.replace`: every real immigrant replaces one of the worst
        residents (:func:`worst_first`; ``context`` unused)."""
        idx, imm, res, valid, order = worst_first(residents, immigrants, valid)
        accepted = valid
        return idx, imm.where(accepted, res), accepted, order


#: the names ``islands.selection`` takes beside ``{_target_: ...}``
SELECTIONS = {"select_best": SelectBest}
#: the names ``islands.replacement`` takes beside ``{_target_: ...}``
REPLACEMENTS = {"fair_replace": FairReplace, "replace_worst": ReplaceWorst}


# -- from the config ---------------------------------------------------------------------------
def _build(field: str, value, names: dict, method: str, signature: str):
    """The policy of config value ``value`` (a name of ``names``, a mapping with ``_target_`` and
    the constructor's arguments, or an object with ``method``); see :func:`replacement_policy`."""
    allowed = f"allowed values are {'|'.join(names)} or {{_target_: a class with {method}({signature})}}"
    if isinstance(value, str):
        if value in names:
            return names[value]()
        raise ValueError(f"{field}={value!r}: {allowed}")
    if not isinstance(value, Mapping):
        if callable(getattr(value, method, None)) and not isinstance(value, type):
            return value  # a policy object (e.g. in a group's spec made by hand)
        raise ValueError(f"{field}={value!r}: {allowed}")
    if "_target_" not in value:
        raise ValueError(f"{field}={dict(value)}: {allowed}")
    from hydra.utils import instantiate  # here: only a _target_ needs Hydra
    from omegaconf import OmegaConf

    target = value["_target_"]
    plain = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else dict(value)
    try:
        policy = instantiate(plain, _convert_="all")
    except Exception as err:  # noqa: BLE001  (Hydra wraps the cause: name the innermost one)
        inner = err
        while inner.__cause__ is not None:
            inner = inner.__cause__
        text = str(inner).strip().splitlines()
        raise ValueError(
            f"{field}._target_={target!r}: cannot build it ({type(inner).__name__}: {text[0] if text else ''})"
        ) from None
    if not callable(getattr(policy, method, None)):
        raise ValueError(f"{field}._target_={target!r}: {type(policy).__name__} has no method {method}(); {allowed}")  # noqa: TRY004
    return policy


def selection_policy(value, n_migrants=None, algorithm=None) -> Selection:
    """The emigrant selection of ``islands.selection``: ``select_best`` (:data:`SELECTIONS`), a
    mapping ``{_target_: class, **arguments}`` or a policy object (returned as it is). With
    ``n_migrants`` and the built ``algorithm`` (an island group's, at its construction), the ``k``
    it will select is checked here, once (:func:`check_migrants`): ``select`` trusts it.

    Raises:
        ValueError: one line naming ``islands.selection`` and the allowed values: an unknown
            name, a mapping without ``_target_``, a target that cannot be built, or an object
            without a ``select`` method; ``islands.n_migrants`` outside ``1..N`` of a population.
    """
    policy = _build("islands.selection", value, SELECTIONS, "select", "f, v, k")
    if algorithm is not None:
        check_migrants(n_migrants, algorithm)
    return policy


def replacement_policy(value) -> Replacement:
    """The immigrant replacement of ``islands.replacement``: ``fair_replace|replace_worst``
    (:data:`REPLACEMENTS`), a mapping ``{_target_: class, **arguments}`` or a policy object
    (returned as it is).

    Raises:
        ValueError: one line naming ``islands.replacement`` and the allowed values, as
            :func:`selection_policy`.
    """
    return _build("islands.replacement", value, REPLACEMENTS, "replace", "residents, immigrants, valid")
