"""The run store: SQLite (WAL) records plus content-addressed screenshots."""
