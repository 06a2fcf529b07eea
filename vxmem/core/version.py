"""vxmem's version, where every layer can read it (pyproject.toml holds the same)."""

__version__ = "0.1.0"
