"""isles entry point from a checkout: ``python run.py +experiment=cmepso [overrides]`` (Hydra).

The same as the installed ``isles`` command and ``python -m isles`` (:mod:`isles.cli`).

Examples:
    python run.py +experiment=cmepso                    # CMEPSO on the welded beam
    python run.py +experiment=cmepso problem=spring     # ... on the spring
    python run.py -m +experiment=cmepso seed='range(20)' logger.experiment_name=cmepso-quality
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

try:
    from isles import early  # noqa: E402

    early.start(sys.argv[1:])  # CuPy's import and the CUDA context overlap the imports below (isles/early.py)
    from isles.cli import main  # noqa: E402
except KeyboardInterrupt:  # Ctrl-C while isles is imported (seconds on a loaded machine): one line, as later
    print("isles: interrupted", file=sys.stderr, flush=True)
    sys.exit(130)

if __name__ == "__main__":
    main()
