"""Call policy shared by every plane: rate limits per credential × agent (:mod:`hivegate.policy.rate_limits`)."""
