"""Who may call what: identities (API keys, JWTs), per-principal policies, rate limits and the audit log."""
