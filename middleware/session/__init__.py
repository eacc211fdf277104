"""State a pipeline keeps across the requests of one session."""
