"""Where memory is kept: the records (SQLite, the embedded default, or PostgreSQL), packet vectors in Chroma, the
contracts both stand on (protocols.py) and every lock with its order (locks.py)."""
