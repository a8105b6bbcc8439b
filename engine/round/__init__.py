"""One round as the runtime runs it: overseer, backstop, ledger, the React variants, decide
and dry-run."""
