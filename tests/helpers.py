"""Config composition for tests (the same composition ``run.py`` does)."""
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from isles.islands import schema as _schema  # noqa: F401  (registers isles_schema in Hydra's ConfigStore)

CONF = str(Path(__file__).resolve().parents[1] / "conf")


def make_cfg(*overrides: str, return_hydra_config: bool = False):
    """Compose ``conf/config.yaml`` with Hydra overrides, as ``python run.py OVERRIDES`` would
    (with ``return_hydra_config``, the ``hydra`` node too: sweeper, launcher, ...)."""
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides), return_hydra_config=return_hydra_config)


def plain(cfg) -> dict:
    """Resolved plain-dict config."""
    return OmegaConf.to_container(cfg, resolve=True)
