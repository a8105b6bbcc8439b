"""Validation of a policy document: the diagnostics Traitdeck reports (DESIGN §2.9)."""
