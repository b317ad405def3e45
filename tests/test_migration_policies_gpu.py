"""GPU: a user's migration policies (tests/migration_policies.py) run on CuPy arrays inside the
captured span graph (islands/span_graph.py), with the plain epochs' result bit for bit, and
choose what they say they choose. ``python -m pytest -m gpu tests/test_migration_policies_gpu.py``."""

import numpy as np
import pytest
from hydra.utils import instantiate

from tests.gpu import cupy_or_skip  # noqa: E402

cp = cupy_or_skip()
pytestmark = pytest.mark.gpu

from isles.islands.coordinator import Coordinator  # noqa: E402

from tests.helpers import make_cfg, plain  # noqa: E402

REJECT = "islands.replacement={_target_: tests.migration_policies.RejectAll}"
WORST = "islands.selection={_target_: tests.migration_policies.SelectWorst}"


def go(*overrides):
    cfg = plain(
        make_cfg(
            "+experiment=de_islands",
            "problem=sphere",
            "problem.dim=8",
            "algorithm.pop_size=16",
            "islands.n=4",
            "islands.n_migrants=2",
            "generations=200",
            "islands.migration_interval=1",
            "topology=ring",
            "logger=none",
            "progress=false",
            *overrides,
        )
    )
    return Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=False).run()


def test_user_policies_inside_the_captured_span_graph_equal_the_plain_epochs():
    from isles.islands.span_graph import SpanGraph  # noqa: PLC0415

    before = SpanGraph.captures
    auto = go(REJECT, WORST, "device=gpu", "islands.span_graph=auto")
    assert SpanGraph.captures > before  # the policies ran inside a captured epoch
    never = go(REJECT, WORST, "device=gpu", "islands.span_graph=never")
    assert auto.best_f == never.best_f and auto.migrations == never.migrations
    for a, b in zip(auto.history, never.history, strict=True):
        np.testing.assert_array_equal(a.island_best_f, b.island_best_f)
    assert auto.migration_count > 0 and auto.migrations_accepted == 0  # RejectAll was used on the GPU
    alone = go("topology=unconnected", "device=gpu", "islands.span_graph=never")
    np.testing.assert_array_equal(auto.history[-1].island_best_f, alone.history[-1].island_best_f)
    worst = go(WORST, "device=gpu")  # SelectWorst with fair_replace: another run than select_best's
    assert worst.best_f != go("device=gpu").best_f


RANDOM = (
    "islands.selection={_target_: tests.migration_policies.SelectRandom}",
    "islands.replacement={_target_: tests.migration_policies.ReplaceRandom}",
)


def test_random_policies_on_the_gpu_are_the_same_on_one_and_two_groups_and_run_plain_epochs(monkeypatch):
    """The context's generator on CuPy (issue 34): the same run on 1 and 2 in-process groups (both
    on this one GPU, as in tests/test_mixed_islands_gpu.py); a policy that takes a context is never
    captured in a span graph."""
    from isles.islands.span_graph import SpanGraph  # noqa: PLC0415

    from tests.test_mixed_islands_gpu import two_groups_on_one_gpu  # noqa: PLC0415

    before = SpanGraph.captures
    one = go(*RANDOM, "device=gpu", "islands.n_actors=1")
    two_groups_on_one_gpu(monkeypatch)
    two = go(*RANDOM, "device=gpu")
    assert SpanGraph.captures == before
    assert one.best_f == two.best_f and one.migrations == two.migrations
    np.testing.assert_array_equal(one.history[-1].island_best_f, two.history[-1].island_best_f)


@pytest.mark.parametrize(
    "policy, needle",
    [
        (
            "islands.selection={_target_: tests.migration_policies.SelectOutOfRange}",
            "SelectOutOfRange.select returned index 16 on island 0",
        ),
        (
            "islands.replacement={_target_: tests.migration_policies.ReplaceAtZero}",
            "ReplaceAtZero.replace returned idx with index 0 repeated 4 times on island 0",
        ),
    ],
)
def test_a_policy_that_breaks_its_contract_on_the_gpu_is_refused_at_the_first_migration(policy, needle):
    from isles.islands.migration.contract import PolicyError  # noqa: PLC0415

    with pytest.raises(PolicyError, match=needle):
        go(policy, "device=gpu", "islands.span_graph=auto")
