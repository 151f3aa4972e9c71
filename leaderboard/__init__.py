"""The local leaderboard: SQLite store, submission checks, web page."""
