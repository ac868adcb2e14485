"""aotc's release (pyproject.toml says the same): stamped into every bundle's provenance and
every tuning record."""

__version__ = "0.1.0"
