"""The Django-free core under every app: pure helpers the domain packages and the web shell share
(text that can be stored, JSON limits). It imports nothing of the project's and no web framework;
the layer contract (``.importlinter``) holds it to that."""
