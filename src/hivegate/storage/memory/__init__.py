"""The stores in process memory (``memory://``): nothing survives the process; for tests and ephemeral runs."""
