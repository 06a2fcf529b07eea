"""A database as portable JSON Lines (docs/EXPORT.md): the format and its export, and restoring it."""
