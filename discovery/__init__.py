"""Discovery: what an agent's MCP servers and python modules offer, written into the draft as
manifests (docs/discovery.md). Its pages and API live in the ``policy:`` namespace and under
``/api/policy/``; the manifests and server settings it writes are the policy app's models."""
