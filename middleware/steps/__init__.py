"""The built-in steps. Each is an ordinary plugin module registered by default."""
