"""The allowed values of the config's typed fields that name a choice, in one place below the
runtime: :mod:`isles.islands.config.schema` checks a config against them, and the parts of the
runtime that act on a choice (:mod:`isles.islands.control.placement`, :mod:`isles.islands.control.pool`)
import them from here, so ``config/`` imports nothing from ``control/``.
"""

#: values of ``islands.mode``: every group waits for the epoch's emigrants, or takes what has come
MODES = ("sync", "async")
#: values of ``islands.transport``: how emigrants go between actors in a sync run (auto: NCCL between
#: GPUs where CuPy has it, else shared-memory channels between the actors of one node and posts to
#: the actors' inboxes between nodes; ray: posts only; islands/transport/nccl.py, islands/transport/channels.py,
#: islands/transport/link.py)
TRANSPORTS = ("auto", "ray", "nccl", "channel")
#: values of ``islands.span_graph``: when a batch's like epochs replay one captured epoch on a GPU
#: (islands/span_graph.py): auto (in-process groups, falling back to the plain epochs where the
#: capture fails), always (also across GPU actors over NCCL), never
SPAN_GRAPHS = ("auto", "always", "never")
#: values of ``islands.placement`` and the Ray placement-group strategy of each (islands/control/placement.py)
STRATEGIES = {"spread": "SPREAD", "strict_spread": "STRICT_SPREAD", "pack": "PACK"}
#: values of ``islands.async_budget``: a pool that every actor draws from, or each island's own
#: generations (islands/control/pool.py)
ASYNC_BUDGETS = ("shared", "island")
