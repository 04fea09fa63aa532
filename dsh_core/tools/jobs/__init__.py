"""Background jobs (SPEC 16): ``bash {run_in_background: true}`` and the tools that follow one.

- :mod:`.table`: a session's jobs (:class:`~.table.JobTable`): started, read, killed, ended
  with the session, and the model told when one ends.
- :mod:`.supervise`: what makes an unsandboxed job die with dsh, a SIGKILL of dsh included.
- :mod:`.tools`: ``job_output``, ``job_list``, ``job_kill``.
"""
