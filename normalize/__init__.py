"""normalize: automate work on a codebase through pluggable drivers."""

__version__ = "0.1.0"
