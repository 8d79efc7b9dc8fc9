"""Version of nbstream (read by the build)."""

__version__ = "0.1.0"
