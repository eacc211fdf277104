"""Version of the chatcli-middleware distribution (read by hatchling and at run time)."""

__version__ = "0.1.0"
