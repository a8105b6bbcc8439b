"""The web shell's helpers every app's API shares (reading a body, the refusals mapped to statuses
once in ``config.api``). Below the apps and above the Django-free core: it knows Django and ninja,
but no app."""
