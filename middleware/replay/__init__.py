"""Replay recorded sessions through policies and charge them with the prompt-cache cost
model (``chatcli-mw simulate`` and the benchmarks)."""
