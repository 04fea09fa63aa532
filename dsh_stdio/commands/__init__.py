"""The commands that are not a conversation: ``--sessions``, ``--show``, ``--demo``."""
