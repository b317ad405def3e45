"""Put the repository root on ``sys.path`` so tests import ``problems``/``algorithms`` uninstalled."""
import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[1])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
