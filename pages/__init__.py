"""Pages that compose several apps: the overview (policy, rounds, tokens), the audit log (entries
linked to the policy things they name), and the impact of a policy change on recorded rounds
(policy sides replayed over observe's rounds, the publish page among them). Above every app and
below ``config``: no app imports a page, so no app needs another one sideways."""
