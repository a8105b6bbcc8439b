"""Where things are in a policy document: paths, YAML source positions, diagnostics,
JSON-safe values."""
