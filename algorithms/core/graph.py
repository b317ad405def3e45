"""CUDA-graph replay of one generation: the GPU fast path for any graph-safe island algorithm.

CuPy issues one kernel launch per array operation, at 5-15 µs of host time each, so a generation
of an algorithm plus a problem such as the welded beam (a few hundred small operations) is bound
by Python, not by the GPU. :class:`GraphStepper` captures one generation
(``algorithm.step``) once as a CUDA graph and replays it: a replay costs one launch, and the GPU
runs the captured kernels back to back.

What makes a generation capturable ("graph-safe", ``algorithm.graph_safe = True``):

* no host synchronisation (``float()``, ``.get()``, boolean-mask indexing, branching on device
  values) and no host-to-device copies inside ``step``;
* everything that changes from one generation to the next is on the device: random numbers come
  from :class:`isles.algorithms.core.random.CounterRNG`, whose device counter ``ctr`` the graph increments at
  the end of each replay, and generation-dependent schedules use
  :meth:`isles.algorithms.core.base.Context.generation_value`.

State arrays live in fixed buffers: the captured generation ends by copying its new state into
the buffers it read, so replays chain. Host integers of the state (``generation``, ``evals``)
advance by the amounts one captured generation added. Temporaries come from a private memory
pool that nothing else allocates from, so replays never overwrite live arrays.

The NumPy twin is simply ``algorithm.run`` (same step, same random numbers).
"""

from __future__ import annotations

import numpy as np


def _is_device_array(v) -> bool:
    return hasattr(v, "shape") and not isinstance(v, np.ndarray)


class GraphStepper:
    """Run generations as replays of one captured CUDA graph (CuPy only).

    Args:
        step_fn: ``state -> state``, one generation (graph-safe, see the module docstring).
        state: flat dict of device arrays and host ints.
        rngs: the :class:`isles.algorithms.core.random.CounterRNG` objects ``step_fn`` draws from; their device
            counters are reset to 0 and advanced by 1 at the end of each replay.
        check: after capture, replay once and compare with the uncaptured warm-up generation,
            bit for bit (:meth:`_check_replay`); the state is restored afterwards.
        ctr_step: generations one replay draws (``step_fn`` runs that many): the counters advance
            by it per replay (default 1).

    Raises:
        ValueError: a NumPy state (nothing to capture), or a step result without some state array.
        RuntimeError (or CuPy's CUDA error): the step cannot be captured (a host synchronisation
            during capture, which CuPy refuses), or, with ``check``, its replay differs.

    Between calls of :meth:`run` the counters are 0, as for plain, non-captured code.
    """

    def __init__(self, step_fn, state: dict, rngs, check: bool = False, ctr_step: int = 1):
        arrays = [v for v in state.values() if _is_device_array(v)]
        if not arrays:
            raise ValueError("GraphStepper needs device (CuPy) arrays in the state")
        xp = __import__("cupy")
        self.xp, self.rngs, self.replays, self.ctr_step = xp, list(rngs), 0, int(ctr_step)
        # a non-blocking stream: capture must not involve the legacy default stream; work is
        # ordered against the caller's stream with events (_follow / run)
        self.stream = xp.cuda.Stream(non_blocking=True)
        self.pool = xp.cuda.MemoryPool()
        self._follow()
        with self.stream:
            self.buffers = {k: v.copy() for k, v in state.items() if _is_device_array(v)}
            self.host0 = {k: v for k, v in state.items() if not _is_device_array(v)}
            for rng in self.rngs:
                rng.ctr[...] = 0  # replay r draws generation host0 + r
            with xp.cuda.using_allocator(self.pool.malloc):
                # warm-up outside capture: compiles kernels and fills the private pool's cache
                warm = step_fn({**self.host0, **self.buffers})
                self.delta = {
                    k: warm[k] - v
                    for k, v in self.host0.items()
                    if isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                }
                missing = sorted(k for k in self.buffers if k not in warm)
                if missing:
                    raise ValueError(f"GraphStepper: the step's result lacks the state arrays {missing}")
                first = {k: warm[k] for k in self.buffers} if check else None
                del warm
                self.stream.synchronize()
                self.stream.begin_capture()
                try:
                    out = step_fn({**self.host0, **self.buffers})
                    for k, buf in self.buffers.items():
                        buf[...] = out[k]
                    for rng in self.rngs:
                        rng.ctr += np.uint64(self.ctr_step)
                finally:
                    # a failed capture (e.g. a host synchronisation: CuPy raises) must still end
                    # it, or the stream stays in capture mode; the original error propagates
                    graph = self._end_capture_quietly()
                if graph is None:
                    raise RuntimeError(
                        "the CUDA-graph capture was invalidated (an operation not "
                        "allowed during capture, e.g. a host synchronisation)"
                    )
                self.graph = graph
                del out
            if check:
                self._check_replay(state, first)
        self.stream.synchronize()

    def _end_capture_quietly(self):
        """End the capture of ``self.stream``; the graph, or ``None`` if the capture failed
        (an error is being raised already)."""
        try:
            return self.stream.end_capture()
        except Exception:  # noqa: BLE001 - the capture's own error is the one that matters
            return None

    def _check_replay(self, state: dict, first: dict) -> None:
        """Replay the graph once from ``state`` and compare with the warm-up step ``first``
        (same generation, uncaptured), bit for bit (NaN equal to NaN); then restore ``state``.

        Raises:
            RuntimeError: naming the state arrays that differ: the step has an effect that a
                replay does not repeat (Python-side state, a host-side random generator, ...).
        """
        xp = self.xp
        self.graph.launch(self.stream)
        for rng in self.rngs:
            rng.ctr[...] = 0
        bad = []
        for k, buf in self.buffers.items():
            a, b = buf, first[k]
            same = a.shape == b.shape and bool(xp.all((a == b) | ((a != a) & (b != b))))
            if not same:
                bad.append(k)
            buf[...] = state[k]
        if bad:
            raise RuntimeError(
                f"a replay of the captured generation differs from the generation run directly "
                f"(state arrays {bad}): the step depends on something a replay does not repeat"
            )

    @classmethod
    def for_algorithm(cls, algorithm, ctx, state: dict) -> GraphStepper:
        """Stepper of ``algorithm.step`` followed by ``algorithm.track_target`` (a no-op without a
        stop target); ``algorithm.graph_safe`` must be True.

        Raises:
            ValueError: the algorithm is not graph-safe, or ``ctx.xp`` is NumPy.
        """
        if ctx.xp is np or not getattr(algorithm, "graph_safe", False):
            raise ValueError(f"{type(algorithm).__name__}: CUDA-graph replay needs CuPy and graph_safe = True")
        return cls(lambda s: algorithm.track_target(ctx, algorithm.step(ctx, s)), state, [ctx.rng])

    def run(self, n_generations: int) -> None:
        """Replay ``n_generations`` generations (asynchronous: no host synchronisation).

        The RNG counters hold the replay offset only while the replays run (set before, reset
        to 0 after, both queued on the stream), so a draw outside the graph between two calls
        (migration, a plain step) sees generation ``state["generation"]``, not that plus the
        offset."""
        self._follow()
        with self.stream:
            for rng in self.rngs:
                rng.ctr[...] = np.uint64(self.replays * self.ctr_step)
            for _ in range(int(n_generations)):
                self.graph.launch(self.stream)
            for rng in self.rngs:
                rng.ctr[...] = 0
        self.replays += int(n_generations)
        self._lead()

    @property
    def state(self) -> dict:
        """The current state: the buffers plus host ints advanced by the replays so far."""
        return {**self.host_at(self.replays), **self.buffers}

    def host_at(self, replays: int) -> dict:
        """The state's host values after ``replays`` replays (host ints advance by a replay's amounts)."""
        return {k: (v + replays * self.delta[k] if k in self.delta else v) for k, v in self.host0.items()}

    def load(self, state: dict) -> None:
        """Copy a state (e.g. after migration) into the buffers; host ints must be unchanged."""
        self._follow()
        with self.stream:
            for k, buf in self.buffers.items():
                if state[k] is not buf:
                    buf[...] = state[k]
        self._lead()

    def _follow(self) -> None:
        """Make this stream wait for the work queued so far on the caller's current stream."""
        ev = self.xp.cuda.Event(disable_timing=True)
        ev.record(self.xp.cuda.get_current_stream())
        self.stream.wait_event(ev)

    def _lead(self) -> None:
        """Make the caller's current stream wait for the work queued on this stream."""
        ev = self.xp.cuda.Event(disable_timing=True)
        ev.record(self.stream)
        self.xp.cuda.get_current_stream().wait_event(ev)

    def close(self) -> dict:
        """Stop replaying; return the state (the RNG counters are already 0)."""
        self.stream.synchronize()
        for rng in self.rngs:
            rng.ctr[...] = 0
        return self.state


#: :meth:`RowRing.put`'s CuPy kernel ``ring[slot * n + i] = v[i]`` (signature, body, name), and the kernel once built
_RING_PUT = ("T v, raw int64 slot, int64 n", "raw T ring", "ring[slot[0] * n + i] = v", "isles_ring_put")
_RING_KERNEL: list = []


class RowRing:
    """Per-epoch rows written by a captured graph into device buffers (``islands.span_graph``):
    each :meth:`put` (inside the captured function) writes its values into row ``slot`` of one
    buffer per key and advances ``slot`` on the device, so replays fill rows ``0, 1, ...`` with no
    copy launched from the host; :meth:`take` copies the first rows out once per block of replays.

    Args:
        xp: NumPy or CuPy.
        max_bytes: the most bytes the buffers hold (rows per block: that over a row's bytes,
            at least 1, at most ``max_rows``).
        max_rows: the most rows per block.

    The buffers are made at the first :meth:`put` (the uncaptured warm-up of
    :class:`GraphStepper`), so a capture only writes into them.
    """

    def __init__(self, xp, max_bytes: int = 64 << 20, max_rows: int = 256):
        self.xp, self.max_bytes, self.max_rows = xp, int(max_bytes), int(max_rows)
        self.slot = xp.zeros(1, dtype=xp.int64)
        self.rings: dict = {}
        self.rows = 0  #: rows per block (0 before the first put)

    def put(self, values: dict) -> None:
        """Write ``values`` ``{key: array}`` into the current row and advance the row (device ops only)."""
        xp = self.xp
        if not self.rings:
            size = sum(int(getattr(v, "nbytes", 8)) for v in values.values())
            self.rows = max(1, min(self.max_rows, self.max_bytes // max(1, size)))
            self.rings = {k: xp.zeros((self.rows, *xp.shape(v)), dtype=xp.asarray(v).dtype) for k, v in values.items()}
        for k, v in values.items():
            ring = self.rings[k]
            if xp is np:
                ring[int(self.slot[0])] = v
            else:
                if not _RING_KERNEL:  # built once a process; CuPy compiles it once per device and dtype
                    _RING_KERNEL.append(xp.ElementwiseKernel(*_RING_PUT))
                v = xp.ascontiguousarray(xp.asarray(v, dtype=ring.dtype))
                _RING_KERNEL[0](v, self.slot, v.size, ring)
        self.slot += 1

    def reset(self) -> None:
        """The next :meth:`put` writes row 0 (queued on the stream, no host synchronisation)."""
        self.slot.fill(0)

    def take(self, n: int) -> dict:
        """Copies of the first ``n`` rows ``{key: (n, ...)}`` (device copies, no host synchronisation)."""
        return {k: ring[:n].copy() for k, ring in self.rings.items()}


class DirectStepper:
    """The NumPy twin of :class:`GraphStepper`: the same interface (:meth:`run`, :attr:`state`,
    :meth:`close`), each replay a direct call of ``step_fn`` on the current state.

    Args:
        step_fn: ``state -> state`` (a new state; host ints advanced by the step itself).
        state: flat dict of arrays and host ints.
    """

    def __init__(self, step_fn, state: dict):
        self.step_fn, self.state = step_fn, dict(state)

    def run(self, n_generations: int) -> None:
        """``n_generations`` calls of ``step_fn``."""
        for _ in range(int(n_generations)):
            self.state = self.step_fn(self.state)

    def close(self) -> dict:
        """The current state."""
        return self.state


#: generations per captured CUDA graph of a fused plan (:class:`PingPongGraph`; even: the ping-pong
#: ends where it began)
GRAPH_GENERATIONS = 64


class PingPongGraph:
    """Generations of a fused plan (DE, GA, EP) between two preallocated buffer sets, as
    replays of one captured CUDA graph of ``graph_generations`` generations plus single launches.

    A plan that mixes this in provides ``cp`` (CuPy), ``graph_generations`` (even, or 0 for no
    graph), ``_buffers()`` (the pair of buffer sets), a device generation counter ``_gen``, the
    kernel ``_k_add`` (``gen += K``) and ``_step(src, dst, k)``: one generation from buffer set
    ``src`` to ``dst`` whose draws use ``gen + k``; :meth:`_start` also needs ``_k_set`` (``gen = v``). A graph of ``K`` generations runs ``k = 0 ..
    K - 1`` (ending where it began, in buffer set 0), then advances ``gen`` by ``K``, so replays
    chain; nothing syncs with the host.
    """

    _graph = None
    _graph_stream = None
    tracker = None  # a TargetTracker (algorithms/core/plan.py) when the context has a stop target

    def _tracked(self, dst):
        """``(f, v, n, stride, idx)`` of the population held by buffer set ``dst`` for the target
        tracker (rows of ``stride``; the first ``n`` or the positions ``idx``)."""
        raise NotImplementedError

    def _track_target(self, dst, k: int) -> None:
        """Record the stop target after the generation ``gen + k`` that wrote ``dst`` (a no-op
        without a tracker)."""
        if self.tracker is not None:
            f, v, n, stride, idx = self._tracked(dst)
            self.tracker.launch(f, v, n, stride, self._gen, k, idx)

    def _start(self, arrays, generation) -> None:
        """Copy ``arrays`` (the state's, in buffer order) into buffer set 0 and set the device
        generation counter ``_gen`` to ``generation`` (kernel ``_k_set``: ``gen = v``); no host sync."""
        for dst, src in zip(self._buffers()[0], arrays, strict=False):
            self.cp.copyto(dst, src)
        self._k_set((1,), (1,), (self._gen, np.int64(generation)))

    def _graph_exec(self):
        """The captured graph (built on first use): ``K`` generations 0 -> 1 -> 0 ..., then gen += K."""
        if self._graph is None:
            cp = self.cp
            bufs = self._buffers()
            K = self.graph_generations
            stream = cp.cuda.Stream(non_blocking=True)
            with stream:
                stream.begin_capture()
                try:
                    for k in range(K):
                        self._step(bufs[k % 2], bufs[(k + 1) % 2], k)
                        self._track_target(bufs[(k + 1) % 2], k)
                    self._k_add((1,), (1,), (self._gen, np.int64(K)))
                finally:
                    graph = stream.end_capture()
            self._graph, self._graph_stream = graph, stream
        return self._graph

    def _advance(self, n: int):
        """Run ``n`` generations starting from buffer set 0 (``gen`` holds the first one's
        number). Returns ``(buffers, rem)``: the buffer set that holds the last generation, and
        how many single launches followed the replays (``gen + rem`` is the next generation)."""
        bufs = self._buffers()
        K = self.graph_generations if self.graph_generations % 2 == 0 else 0
        n_graph = n // K if K else 0
        if n_graph:
            graph = self._graph_exec()
            for _ in range(n_graph):
                graph.launch()
        rem = n - n_graph * K
        for k in range(rem):
            self._step(bufs[k % 2], bufs[(k + 1) % 2], k)
            self._track_target(bufs[(k + 1) % 2], k)
        return bufs[rem % 2], rem


def split(flat: dict, prefix: str) -> dict:
    """The entries of a flat stepper state under ``prefix``, without it (the inverse of
    :func:`prefixed`: several states in one :class:`GraphStepper`)."""
    return {k[len(prefix) :]: v for k, v in flat.items() if k.startswith(prefix)}


def prefixed(d: dict, prefix: str) -> dict:
    """``d`` with ``prefix`` before every key (one part of a flat stepper state)."""
    return {prefix + k: v for k, v in d.items()}
