"""The engine: what the runtime (KDCube) does with a tool policy, as pure functions over plain data.

Django-free (the ``domain`` contract in ``.importlinter``); the web app, the ``traitdeck`` CLI, the
conformance recorder and the simulator all call it. Its subpackages are layered (``engine``
contract): ``document`` (paths, positions, diagnostics) < ``traits`` (trait keys, builtins, the
round policy) < ``round`` (one round: overseer, backstop, ledger, the React variants, decide and
dry-run) | ``tools`` (an agent's connections, manifests and resolved tools) < ``catalog`` (the
model-facing tool list, multi-action) < ``replay`` (a draft replayed over recorded rounds).
docs/engine.md maps every runtime rule to one function here.
"""
