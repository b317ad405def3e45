"""Benchmark problems (``shared/problems.md``): the interface, the registry and the built-ins."""
from problems.base import Problem, ScalableProblem
from problems.registry import PROBLEMS, make_problem

__all__ = ["Problem", "ScalableProblem", "PROBLEMS", "make_problem"]
