"""ASGI entry point: HTTP through Django, websockets through Channels."""

from __future__ import annotations

import gc
import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

# Django must be set up before anything imports models (consumers, routing).
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402

from config.routing import websocket_urlpatterns  # noqa: E402

http_app = django_asgi_app
if settings.SERVE_STATIC_FROM_SOURCE:
    # Dev and test serving from the source tree under daphne; with DEBUG off (and no
    # TRAITDECK_SERVE_STATIC) whitenoise serves the collected files instead.
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    http_app = ASGIStaticFilesHandler(django_asgi_app)

application = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)

# The collector, tuned for a server whose requests allocate in bursts. An ingest batch holds its
# thousand parsed events (several containers each) until it commits: with the default
# threshold (700 allocations) it ran a dozen young collections per batch and promoted the batch
# to the old generation, whose full collections then walked the whole heap — a third of a
# 1000-event batch's CPU (docs/performance.md). A young generation of 10,000 lets most of a
# batch die young, and the objects of startup (modules, settings, URL patterns, templates),
# which live as long as the process, are moved out of the collector's walks.
gc.set_threshold(10_000, 10, 10)
gc.freeze()
