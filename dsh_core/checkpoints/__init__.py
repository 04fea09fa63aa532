"""Checkpoints of the working directory, and undoing what a turn did to its files (SPEC 14).

    store = CheckpointStore.open(home / "checkpoints")
    before = Snapshotter(store, root).take()             # a walk and stats; reads what changed
    changes = diff(store, before.root, after.root)       # what a turn changed
    plan = plan_restore(root, identity, changes, towards="before")   # restorable, conflicts
    apply_restore(store, plan)

:mod:`.store` is the content-addressed, deduplicated store under ``$DSH_HOME/checkpoints/``
(SQLite, with the stat cache and pruning); :mod:`.snapshot` walks the tree into it;
:mod:`.restore` writes a checkpoint's files back beneath the working directory without
following a link; :mod:`.turns` ties them to a session's log: the checkpoint before a turn's
first change, the changes at its end, ``/undo``, ``/redo`` and ``/rewind``. The design note is
``docs/notes/2026-12-02-checkpoints-and-undo.md``.

May import: the leaves, :mod:`dsh_core.model`, :mod:`dsh_core.session`, :mod:`dsh_core.trust`,
:mod:`dsh_core.tools`.
"""
