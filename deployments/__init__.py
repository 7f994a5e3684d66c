"""The Serve application: a thin ingress deployment over one `RouterService`, its HTTP and MCP adapters,
the middleware every request passes, metrics, and the embedder deployment for large models."""
