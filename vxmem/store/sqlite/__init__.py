"""The SQLite side of the file store: the database file, its schema and the files beside it."""
