"""``python -m isles +experiment=NAME [overrides]``: the same as the ``isles`` command."""
from isles.cli import main

if __name__ == "__main__":
    main()
