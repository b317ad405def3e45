"""An island group that counts, in its Ray actor, the schema checks made while it is built and runs
(``tests/test_validation_once.py``; a module of its own so that Ray's workers import it by name)."""

from isles.islands.config import schema
from isles.islands.group import IslandGroup


class CountingGroup(IslandGroup):
    """An island group counting in its actor the schema checks (reported by :meth:`info`): the
    runtime's groups trust the driver's checked config (their :class:`GroupSpec`)."""

    def __init__(self, *args, **kwargs):
        counted = {"n": 0}
        check = schema.check_values

        def counting(cfg):
            counted["n"] += 1
            return check(cfg)

        schema.check_values = counting
        try:
            super().__init__(*args, **kwargs)
        finally:
            schema.check_values = check
        self.checks = counted["n"]

    def info(self) -> dict:
        """The group's info with the checks counted in this actor."""
        return {**super().info(), "checks_in_actor": self.checks}
