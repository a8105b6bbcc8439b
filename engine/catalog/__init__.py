"""The model-facing tool catalog and the multi-action tool."""
