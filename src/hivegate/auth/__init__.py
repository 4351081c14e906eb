"""Credentials: password hashing and API key minting and recognition (users' ``oag_`` and agents' ``bak_`` keys)."""
