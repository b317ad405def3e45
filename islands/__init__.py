"""isles' island runtime: placement and actors, island groups, migration, the planner, the epoch
loops, the transport between actors, recovery, checkpoints, results, callbacks, the loop's
plug-in interface, and the typed config schema with its validation. It names no algorithm, and
imports nothing of the application around it (:mod:`isles.app`: job, tracking, sweeps, console).

The config schema registers itself in Hydra's ConfigStore when :mod:`isles.islands.config.schema` is
imported (by :mod:`isles.app.job`, hence by the ``isles`` command); importing this package
alone does not import Hydra, so that the MLflow tracking process starts light.
"""

from isles import refuse_old_name

refuse_old_name(__name__)  # imported as top-level 'islands': one line naming isles.islands
