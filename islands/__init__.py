"""isles' island runtime (Ray actors, coordinator, tracking); importing it registers the config schema."""
from isles.islands import schema as _schema  # noqa: F401  (Hydra ConfigStore: isles_schema)
