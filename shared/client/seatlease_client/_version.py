"""The client distribution's version: the one place it is written (pyproject.toml reads
it, the User-Agent sends it)."""

__version__ = "0.2.0"
