"""A pytest plugin that installs the stand-in import hook before the runtime's tests are collected
(``-p conformance.conftest_plugin``); ``KDCUBE_SRC`` names the runtime's package root."""

from __future__ import annotations

import os

from conformance import stubs

stubs.install(os.environ["KDCUBE_SRC"])
