"""What the model may not do and how it is enforced: the policy (:mod:`.policy`), credentials,
the working directory's protections, and the bubblewrap sandbox with its seccomp filter.

May import: the leaves, :mod:`dsh_core.model`, :mod:`dsh_core.session`. The policy loads with the
first tool, not at startup; the one name the system prompt shares with it is here, so that
reading ``AGENTS.md`` does not load it.
"""

AGENTS_FILE = "AGENTS.md"
"""The instructions file: what it says joins the system prompt of later sessions, so it is
protected (:func:`.policy.protected_reason`)."""
