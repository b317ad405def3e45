"""Where a run's start-up goes: the seconds since the process started at each step of one run, on stderr.

    python benchmarks/startup_timeline.py +experiment=cmepso device=gpu logger=none progress=false
    python benchmarks/startup_timeline.py --root /path/to/other/checkout +experiment=cmepso device=gpu

Runs the command as ``run.py`` does (the early CUDA thread of :mod:`isles.early` first, where the
checkout has it; then :func:`isles.cli.main`) and wraps the steps of the run's path: the command's
imports, Hydra's ``run`` and ``compose_config``, :func:`isles.app.job.run_job`, its ``prepare`` (the
config checked, the problem built), the placement (``choose``) and each device's probe
(:func:`isles.islands.control.probe.measure`), the coordinator's ``__init__`` and ``run`` (the
evolution), the early thread's start and end, and the exit. Each line: ``T <seconds> <step> start|end``.
docs/startup.md ("The base start-up on the GPU, taken apart") has the H200's figures.
"""

from __future__ import annotations

import atexit
import os
import sys
import time

T0 = time.perf_counter()


def say(what: str) -> None:
    """Print ``T <seconds since the start> <what>`` on stderr."""
    print(f"T {time.perf_counter() - T0:7.3f} {what}", file=sys.stderr, flush=True)


def wrap(obj, name: str, label: str) -> None:
    """Replace ``obj.name`` by a function that says ``label start`` and ``label end`` around it."""
    f = getattr(obj, name)

    def timed(*args, **kwargs):
        say(f"{label} start" + (f" {args[3]}" if label == "probe" else ""))  # the probe's device
        try:
            return f(*args, **kwargs)
        finally:
            say(f"{label} end")

    setattr(obj, name, timed)


def main() -> None:
    """Run the command line (after an optional ``--root CHECKOUT``) with its steps timed."""
    argv = sys.argv[1:]
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if argv[:1] == ["--root"]:
        root, argv = os.path.abspath(argv[1]), argv[2:]
    sys.path.insert(0, root)
    atexit.register(say, "exit")
    try:  # as run.py does; a checkout without isles.early runs without it
        from isles import early  # noqa: PLC0415

        warm = early._warm

        def timed_warm():
            say("early thread start")
            warm()
            say("early thread end")

        early._warm = timed_warm
        early.start(argv)
    except ImportError:
        pass
    import isles.cli as cli  # noqa: PLC0415

    say("isles.cli imported")
    import isles.app.job as job  # noqa: PLC0415
    import isles.islands.control.probe as probe  # noqa: PLC0415
    from hydra._internal.hydra import Hydra  # noqa: PLC0415
    from isles.islands.coordinator import Coordinator  # noqa: PLC0415

    for obj, name, label in (
        (Hydra, "run", "Hydra.run"),
        (Hydra, "compose_config", "compose"),
        (cli, "run_job", "run_job"),
        (job, "prepare", "prepare"),
        (job, "choose", "choose"),
        (probe, "measure", "probe"),
        (Coordinator, "__init__", "Coordinator.__init__"),
        (Coordinator, "run", "Coordinator.run"),
    ):
        wrap(obj, name, label)
    sys.argv = [os.path.join(root, "run.py"), *argv]
    cli.main()


if __name__ == "__main__":
    main()
