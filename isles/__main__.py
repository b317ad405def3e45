"""``python -m isles +experiment=NAME [overrides]``: the same as the ``isles`` command.

Also from the folder that holds a checkout named ``isles`` (the usual layout after
``git clone ... isles && pip install -e isles``): ``-m`` puts that folder first on ``sys.path``, and
the checkout, which has no ``__init__.py`` at its top, becomes a namespace package ``isles`` that
hides the installed package (an editable install's finder comes after Python's own). Only this
module is then found (through the install); :func:`unshadow` imports the package again without
that folder, and puts it back on ``sys.path`` after.
"""

import os
import sys


def unshadow() -> None:
    """If ``isles`` was imported as a namespace package (a folder named ``isles`` without
    ``__init__.py`` on ``sys.path``, e.g. a checkout), import the installed package instead.

    Raises:
        SystemExit: 2, with one line saying why and what to do, when no package ``isles`` can be
            found once the shadowing folders are left out.
    """
    shadow = sys.modules.get("isles")
    if shadow is None or getattr(shadow, "__file__", None) is not None:
        return
    folders = [str(p) for p in getattr(shadow, "__path__", [])]
    parents = {os.path.realpath(os.path.dirname(f)) for f in folders}
    saved = list(sys.path)
    for name in [m for m in sys.modules if m == "isles" or m.startswith("isles.")]:
        del sys.modules[name]
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.getcwd()) not in parents]
    try:
        import isles  # noqa: F401  (the installed package)
    except ImportError:
        print(
            f"isles: error: the folder {folders[0] if folders else 'isles'} (not a Python package) hides the "
            "package isles, and isles is not installed: install it (pip install -e isles) or run from "
            "another folder",
            file=sys.stderr,
        )
        sys.exit(2)
    finally:
        sys.path[:] = saved


if __name__ == "__main__":
    unshadow()
    try:
        from isles import early

        early.start(sys.argv[1:])  # CuPy's import and the CUDA context overlap the imports below (isles/early.py)
        from isles.cli import main
    except KeyboardInterrupt:  # Ctrl-C while isles is imported: one line, as at any later moment
        print("isles: interrupted", file=sys.stderr, flush=True)
        sys.exit(130)

    main()
