"""A simulated runtime for the demo, the benches and the tests: it streams rounds the way a react
agent does (``runtime``: what the model says and what the runtime decides, through the engine's
dry run; ``scenarios``: which behaviour a round shows) and posts them to a server over HTTP like
a runtime (``posting``). No Django: ``manage.py simulate`` (``observe``) is its command."""
