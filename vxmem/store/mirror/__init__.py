"""The in-memory mirror of the database: its columns, how it is loaded, and the file it is saved to."""
