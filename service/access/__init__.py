"""Who may do what: API keys and roles (auth) and replay-safe requests (idempotency)."""
