"""An in-actor archipelago that counts, in its Ray actor, the schema checks its Coordinator makes
(``tests/test_validation_once.py``; a module of its own so that Ray's workers import it by name)."""

from isles.islands import schema
from isles.islands.actor_loop import Archipelago


class CountingArchipelago(Archipelago):
    """The in-actor archipelago, counting in its actor the schema checks its Coordinator makes
    (reported by :meth:`info`)."""

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

    def info(self) -> list:
        """The group's info with the checks counted in this actor."""
        return [{**i, "checks_in_actor": self.checks} for i in super().info()]
