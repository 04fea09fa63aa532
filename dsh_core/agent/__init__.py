"""The agent loop: a turn's steps, running the model's tool calls, the history it sends,
approval, cancellation, compaction and the system prompt.

May import: the leaves, :mod:`dsh_core.model`, :mod:`dsh_core.session`, :mod:`dsh_core.trust`,
:mod:`dsh_core.tools`, :mod:`dsh_core.checkpoints`.
"""
