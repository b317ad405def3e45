"""Shared-memory channels between the actors of one node (islands/transport/channels.py): the transport's
routing, copies and checks with stand-in channels; a real channel between two Ray actors, its
timeout and its abort; whole sync runs over channels equal the in-process run bit for bit."""

import time

import numpy as np
import pytest
from hydra.utils import instantiate
from isles.algorithms.core.population import Population
from isles.islands.control.executor import Executor
from isles.islands.coordinator import Coordinator
from isles.islands.transport.channels import ChannelLinks, ChannelTransport
from isles.islands.transport.kinds import CHANNELS
from isles.islands.transport.link import Aborted

from tests.helpers import make_cfg, plain
from tests.test_spmd import DE


class FakeChannel:
    """A channel in one process: what is written is read in order."""

    def __init__(self):
        self.box, self.closed = [], False

    def write(self, value, timeout=None):
        self.box.append(value)

    def read(self, timeout=None):
        return self.box.pop(0)


class FakePosts:
    """ActorTransport's interface: records posts, answers takes from ``inbox``."""

    def __init__(self, inbox=None):
        self.sent, self.inbox = [], inbox or {}

    def send(self, span, epoch, messages):
        self.sent.append((span, epoch, messages))

    def take(self, span, epoch, senders, timeout_s):
        return {k: v for s in senders for k, v in self.inbox.get(s, {}).items()}


def pop(value: float, dim: int = 3) -> Population:
    return Population(np.full((1, 1, dim), value), np.full((1, 1), value), np.zeros((1, 1)))


def linked(posts=None):
    """Two transports, 0 and 1, joined by a pair of stand-in channels."""
    a, b = ChannelLinks(), ChannelLinks()
    a.out[1] = b.inp[0] = FakeChannel()
    b.out[0] = a.inp[1] = FakeChannel()
    return ChannelTransport(a, posts or FakePosts(), 5.0), ChannelTransport(b, posts or FakePosts(), 5.0)


def test_a_message_goes_through_its_pair_s_channel_and_arrives_as_a_copy():
    t0, t1 = linked()
    sent = pop(1.5)
    t0.send(7, 3, {1: {4: sent}})
    sent.genome[...] = -1.0  # the sender's next epoch overwrites its buffers
    got = t1.take(7, 3, [0], 5.0)
    assert list(got) == [4]
    np.testing.assert_array_equal(got[4].genome, np.full((1, 1, 3), 1.5))
    assert t0.posts.sent == []


def test_peers_without_a_channel_get_posts_and_take_merges_both():
    posts = FakePosts(inbox={2: {9: pop(2.0)}})
    t0, t1 = linked(posts)
    t0.send(1, 1, {1: {0: pop(1.0)}, 2: {0: pop(1.0)}})
    assert [(sorted(m), sorted(m[2])) for _, _, m in posts.sent] == [([2], [0])]  # only group 2 is posted to
    got = t1.take(1, 1, [0, 2], 5.0)
    assert sorted(got) == [0, 9] and got[9].f[0, 0] == 2.0


def test_a_message_of_another_epoch_is_an_error_not_a_silent_mix():
    t0, t1 = linked()
    t0.send(1, 2, {1: {0: pop(1.0)}})
    with pytest.raises(RuntimeError, match="span 1 epoch 2, expected span 1 epoch 3"):
        t1.take(1, 3, [0], 5.0)


def test_a_closed_channel_aborts_and_a_slow_peer_times_out():
    from ray.exceptions import RayChannelError, RayChannelTimeoutError  # noqa: PLC0415

    t0, t1 = linked()
    t1.links.inp[0].box.append(RayChannelError("closed"))  # Ray hands a closed channel's error back
    with pytest.raises(Aborted):
        t1.take(1, 1, [0], 5.0)
    for err, expected in ((RayChannelTimeoutError("slow"), TimeoutError), (RayChannelError("closed"), Aborted)):

        def fail(timeout=None, err=err):
            raise err

        t1.links.inp[0].read = fail
        with pytest.raises(expected, match="group 0"):
            t1.take(1, 1, [0], 5.0)


@pytest.fixture(scope="module")
def pair(ray_local):
    """Two Ray actors joined by real shared-memory channels (ChannelLinks.make / join)."""
    ray = ray_local

    @ray.remote(num_cpus=0, max_concurrency=2)
    class Peer:
        def __init__(self, index):
            self.index, self.links = index, ChannelLinks()

        def node(self):
            return ray.get_runtime_context().get_node_id()

        def make(self, readers):
            return self.links.make(readers)

        def join(self, inbound):
            self.links.join(inbound)

        def send(self, span, epoch, messages):
            ChannelTransport(self.links, None, 5.0).send(span, epoch, messages)

        def take(self, span, epoch, senders, timeout_s):
            links = ChannelLinks()  # the channels as they are now: a close() from now on ends this read
            links.inp, self.reading = dict(self.links.inp), True
            try:
                return ChannelTransport(links, None, timeout_s).take(span, epoch, senders, timeout_s)
            except (Aborted, TimeoutError) as err:
                return type(err).__name__
            finally:
                self.reading = False

        def is_reading(self):
            return getattr(self, "reading", False)

        def close(self):
            self.links.close()

    peers = [Peer.remote(0), Peer.remote(1)]
    nodes = ray.get([p.node.remote() for p in peers])
    made = ray.get([peers[i].make.remote({1 - i: (peers[1 - i], nodes[1 - i])}) for i in range(2)])
    ray.get([peers[j].join.remote({1 - j: made[1 - j][j]}) for j in range(2)])
    return ray, peers


def test_real_channels_carry_populations_both_ways_epoch_after_epoch(pair):
    ray, (a, b) = pair
    for epoch in range(1, 6):  # more epochs than buffers: each read frees its buffer for the writer
        ray.get([a.send.remote(1, epoch, {1: {0: pop(epoch)}}), b.send.remote(1, epoch, {0: {5: pop(-epoch)}})])
        got_b, got_a = ray.get([b.take.remote(1, epoch, [0], 5.0), a.take.remote(1, epoch, [1], 5.0)])
        assert got_b[0].f[0, 0] == epoch and got_a[5].f[0, 0] == -epoch


def test_a_read_waiting_on_a_real_channel_times_out_then_is_aborted_by_close(pair):
    ray, (a, b) = pair
    assert ray.get(b.take.remote(2, 1, [0], 0.2)) == "TimeoutError"
    waiting = b.take.remote(2, 1, [0], 30.0)
    while not ray.get(b.is_reading.remote()):  # a poll, not a sleep: on a loaded machine the call starts late
        time.sleep(0.05)
    ray.get(b.close.remote())  # what IslandGroup.abort does
    assert ray.get(waiting) == "Aborted"  # not "TimeoutError": the close ended the wait


@pytest.mark.parametrize(("transport", "link"), [("channel", "channel"), ("auto", "channel"), ("ray", "ray")])
def test_a_sync_run_over_two_cpu_actors_is_the_same_over_channels_and_posts(ray_local, transport, link):
    cfg = plain(make_cfg(*DE, "islands.n_actors=2", f"islands.transport={transport}"))
    coordinator = Coordinator(cfg, instantiate(cfg["topology"]), None, use_ray=True)
    result = coordinator.run()
    assert coordinator.executor.link.name == link
    cfg1 = plain(make_cfg(*DE))
    reference = Coordinator(cfg1, instantiate(cfg1["topology"]), None, use_ray=False).run()
    assert result.best_f == reference.best_f and result.migrations == reference.migrations
    np.testing.assert_array_equal(result.best_x, reference.best_x)
    for x, y in zip(result.history, reference.history, strict=True):
        np.testing.assert_array_equal(x.island_best_f, y.island_best_f)


def test_channels_are_not_formed_across_nodes():
    """Groups on different nodes get no channel (posts carry their emigrants)."""
    calls = []

    class Loop(Executor):
        def __init__(self, nodes):
            self.use_ray, self.infos = False, [{"node_id": node} for node in nodes]

    class G:
        def channels_make(self, readers):
            calls.append(readers)
            return {}

        def channels_join(self, inbound):
            pass

    assert CHANNELS.form(Loop(["a", "b"]), [G(), G()]) is False and calls == []
    assert CHANNELS.form(Loop(["a", "b", "a"]), [G(), G(), G()]) is True
    assert [sorted(r) for r in calls] == [[2], [], [0]]
