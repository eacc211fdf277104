"""Built-in plugins that declare things rather than run a step (ChatCLI's tool caps)."""
