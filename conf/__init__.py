"""The Hydra configs of isles (package data, imported as ``isles.conf`` to find this folder)."""
