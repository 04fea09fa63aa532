"""What the model may not do and how it is enforced: the policy (:mod:`.policy`), credentials,
the working directory's protections, and the bubblewrap sandbox with its seccomp filter.

May import: the leaves, :mod:`dsh_core.model`, :mod:`dsh_core.session`. Nothing here is imported
at startup: the policy loads with the first tool.
"""
