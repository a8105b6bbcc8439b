"""The KDCube app: Traitdeck's control plane for its runtime. It pushes published versions into the
bundle's props and reads them back (drift, the push guard), takes a bundle's policy in, and its
``bridge`` subpackage maps KDCube's events to rounds (docs/kdcube-control-plane.md,
docs/kdcube-events.md)."""
