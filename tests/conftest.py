from __future__ import annotations

import os

from hypothesis import settings

# deadline=None: CI machines are shared and slow; derandomize keeps CI failures reproducible.
settings.register_profile("ci", max_examples=200, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=200, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
