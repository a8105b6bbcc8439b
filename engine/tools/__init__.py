"""An agent's tools: connections, named services, manifests, MCP server configs, loading and
resolution."""
