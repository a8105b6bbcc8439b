"""Runtime conformance: record what the KDCube runtime's own code answers (``conformance.record``,
needs ``KDCUBE_SRC``) and check Traitdeck against those recordings (``conformance.compare`` and
``tests/conformance``, no runtime needed)."""
