"""A draft replayed over recorded rounds (draft impact)."""
