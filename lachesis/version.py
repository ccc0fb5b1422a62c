"""The package's version, decided here once: pyproject.toml reads it, the evaluation cache and ENVIRONMENT.json
record it, and CHANGELOG.md names what each one changed."""

__version__ = "0.3.0"
