"""llmbench's version, in a module of its own so the client can name itself without importing
the public API (llmbench/__init__.py imports everything above it)."""

__version__ = "0.1.0"
