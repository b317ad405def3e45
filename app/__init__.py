"""isles' application around the island runtime: one job from a config (:mod:`isles.app.job`),
its MLflow tracking (:mod:`isles.app.tracking`, :mod:`isles.app.tracking_process`,
:mod:`isles.app.tracking_server`), sweeps (:mod:`isles.app.sweeper`, their
MLflow runs :mod:`isles.app.sweep_runs`), Ray's security defaults
(:mod:`isles.app.ray_security`), what a person sees (:mod:`isles.app.progress`,
:mod:`isles.app.report`, :mod:`isles.app.plots`) and the user's modules shipped to a cluster
(:mod:`isles.app.user_modules`).

The runtime (:mod:`isles.islands`) never imports this part; this part drives it.
"""

from isles import refuse_old_name

refuse_old_name(__name__)  # imported as top-level 'app': one line naming isles.app
