"""dsh's version, in a module of its own: the adapter names it without importing the package."""

__version__ = "0.2.0"
