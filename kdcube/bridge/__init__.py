"""The bridge: KDCube's event stream mapped to Traitdeck's rounds (docs/kdcube-events.md). A
Django app of its own (label ``bridge``) inside the KDCube app."""
