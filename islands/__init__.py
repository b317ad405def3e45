"""isles' island runtime (Ray actors, coordinator, migration, tracking).

The config schema registers itself in Hydra's ConfigStore when :mod:`isles.islands.schema` is
imported (by :mod:`isles.islands.job`, hence by the ``isles`` command); importing this package
alone does not import Hydra, so that the MLflow tracking process starts light.
"""
from isles import refuse_old_name

refuse_old_name(__name__)  # imported as top-level 'islands': one line naming isles.islands
