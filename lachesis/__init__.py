"""Lachesis: lifetime-aware KV cache placement across HBM and high-bandwidth flash (reproducibility package)."""

from lachesis.config import DEFAULT, Config
from lachesis.schema import TraceError
from lachesis.trace import Trace, read_trace, write_trace

__all__ = ["Config", "DEFAULT", "Trace", "TraceError", "read_trace", "write_trace"]
#: The distribution's name (pyproject.toml): "lachesis" on the public index is an unrelated project.
DISTRIBUTION = "lachesis-repro"


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:  # run from a source tree that was not installed
        return "unknown"


__version__ = _version()
