"""Trait keys and their values, the built-in tools, execution design and the per-round trait
policy."""
