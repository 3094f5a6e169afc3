"""The client distribution's version (pyproject.toml reads it, the User-Agent sends it):
the value of shared/clients/VERSION, the one version of all five clients, written here
as a literal because a wheel's build cannot read a file outside the client's folder
(tests/test_client_wheel.py checks that the two agree)."""

__version__ = "0.3.0"
