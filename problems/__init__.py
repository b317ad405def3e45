"""Benchmark problems (``shared/problems.md``): the interface, the registry and the built-ins."""

from isles import refuse_old_name

refuse_old_name(__name__)  # imported as top-level 'problems': one line naming isles.problems

from isles.problems.base import Problem, ScalableProblem  # noqa: E402
from isles.problems.registry import PROBLEMS, make_problem  # noqa: E402

__all__ = ["Problem", "ScalableProblem", "PROBLEMS", "make_problem"]
