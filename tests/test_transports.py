"""The transports of a sync run as objects (islands/transport/kinds.py): which one each
``islands.transport`` value forms, in which order, and a span over a transport given in its route."""

import pytest
from isles.islands.config.schema import TRANSPORTS
from isles.islands.transport.kinds import CHANNELS, NCCL, POSTS, TRIES, Transport, form

from tests.test_exchange import _groups, _spans, assert_same_spans


class Ex:
    """The executor's part that transports use: its groups' calls answered here, recorded by name."""

    def __init__(self, uid=None, nodes=("a", "a"), use_ray=True):
        self.uid, self.use_ray, self.calls = uid, use_ray, []
        self.infos = [{"node_id": n} for n in nodes]

    def call(self, group, name, *args):
        self.calls.append(name)
        return {"nccl_unique_id": self.uid, "channels_make": {}}.get(name)

    def gather(self, refs):
        return list(refs)


GROUPS = ["g0", "g1"]


def test_every_islands_transport_value_has_its_transports_and_each_is_a_transport():
    assert sorted(TRIES) == sorted(TRANSPORTS)
    for t in (POSTS, CHANNELS, NCCL):
        assert isinstance(t, Transport)
        assert t.name in TRANSPORTS


@pytest.mark.parametrize(
    ("wanted", "uid", "nodes", "formed", "asked"),
    [
        ("auto", "u", ("a", "a"), NCCL, ["nccl_unique_id", "nccl_join", "nccl_join"]),
        (
            "auto",
            None,
            ("a", "a"),
            CHANNELS,
            ["nccl_unique_id", "channels_make", "channels_make", "channels_join", "channels_join"],
        ),
        ("auto", None, ("a", "b"), POSTS, ["nccl_unique_id"]),
        ("channel", "u", ("a", "a"), CHANNELS, ["channels_make", "channels_make", "channels_join", "channels_join"]),
        ("channel", "u", ("a", "b"), POSTS, []),
        ("nccl", "u", ("a", "a"), NCCL, ["nccl_unique_id", "nccl_join", "nccl_join"]),
        ("ray", "u", ("a", "a"), POSTS, []),
    ],
)
def test_each_islands_transport_value_forms_the_first_of_its_transports_that_can(wanted, uid, nodes, formed, asked):
    ex = Ex(uid, nodes)
    assert form(ex, GROUPS, wanted) is formed
    assert sorted(ex.calls) == sorted(asked)


def test_nccl_asked_for_and_not_formed_is_refused_and_in_process_groups_post():
    with pytest.raises(ValueError, match=r"^islands.transport=nccl: the island groups cannot use NCCL"):
        form(Ex(None), GROUPS, "nccl")
    ex = Ex("u", use_ray=False)  # in-process groups share one GPU: never NCCL, never channels
    assert form(ex, GROUPS, "nccl") is POSTS and form(ex, GROUPS, "auto") is POSTS and ex.calls == []


class Counted:
    """A transport of one's own: posts, counting the links it makes."""

    name, collective = "counted", False

    def __init__(self):
        self.links = []

    def form(self, ex, groups) -> bool:
        return True

    def link(self, group, route, span):
        self.links.append((route.index, span))
        return POSTS.link(group, route, span)


def test_a_span_goes_over_the_transport_its_route_names():
    """Two groups in threads run one span over a transport of one's own (the Route's): each group's
    link is the transport's, and every epoch equals the span over posts, bit for bit."""
    counted = Counted()
    assert isinstance(counted, Transport)
    out = _spans("inbox", "ring", [1] * 5, made=_groups(2, "topology=ring"), transport=counted)
    assert sorted(counted.links) == [(0, 1), (1, 1)]
    assert_same_spans(_spans("inbox", "ring", [1] * 5), out)
    assert any(m for s in out[0] for m in s.migrations)
