"""Benchmark problems (``shared/problems.md``): the interface, the registry and the built-ins."""
from isles.problems.base import Problem, ScalableProblem
from isles.problems.registry import PROBLEMS, make_problem

__all__ = ["Problem", "ScalableProblem", "PROBLEMS", "make_problem"]
