"""How emigrants travel between island groups: the links of a span (inboxes and posts, NCCL group calls, shared-memory channels) and how a group forms them."""
