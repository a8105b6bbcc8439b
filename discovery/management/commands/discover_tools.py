"""``discover_tools``: list the MCP servers the agents connect to and store their tools as the
agents' manifests (docs/discovery.md)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from audit.services import add_actor_argument, cli_actor
from discovery.services import DiscoveryRefused, mcp_discover
from engine.tools.loading import MCP, mcp_server
from policy.selectors import agent_resolution, draft_state


class Command(BaseCommand):
    help = (
        "List every MCP server the agents connect to (only what TRAITDECK_MCP_STDIO_COMMANDS / "
        "TRAITDECK_MCP_HTTP_HOSTS allow) and store the tools as each agent's manifest. "
        "Exit 1 when a server could not be listed or the agent/server does not exist."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--agent", help="only this agent")
        parser.add_argument("--server", dest="server_id", help="only this MCP server id")
        add_actor_argument(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        state = draft_state()
        agents = [options["agent"]] if options["agent"] else state.agents
        if options["agent"] and options["agent"] not in state.agents:
            raise CommandError(f"no agent {options['agent']!r} in the draft", returncode=1)
        pairs = [
            (agent, server)
            for agent in agents
            for server in dict.fromkeys(
                mcp_server(c.raw)
                for c in agent_resolution(state, agent).connections
                if c.kind == MCP and c.loadable
            )
            if not options["server_id"] or server == options["server_id"]
        ]
        if not pairs:
            raise CommandError("no MCP connection matches", returncode=1)
        failed = 0
        for agent, server in pairs:
            try:
                found = mcp_discover(
                    agent=agent, server_id=server, user=cli_actor(options["actor"])
                )
            except (DiscoveryRefused, LookupError) as exc:
                failed += 1
                self.stderr.write(f"{agent} {server}: {exc}")
                continue
            self.stdout.write(
                f"{agent} {server}: {found.tools} tool(s) on {found.pages} page(s) in "
                f"{found.seconds:.2f} s (mcp {found.sdk}); draft revision {found.revision}"
            )
        if failed:
            raise CommandError(f"{failed} server(s) could not be listed", returncode=1)
