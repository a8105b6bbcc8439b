"""What clients were given keeps its name after the apps were regrouped (issue 36): the OpenAPI
operation ids of the routes whose modules moved (a generated client calls them by id)."""

from __future__ import annotations

from config.api import api


def test_moved_routes_keep_their_operation_ids() -> None:
    paths = api.get_openapi_schema()["paths"]
    assert paths["/api/v1/kdcube"]["get"]["operationId"] == "policy_api_kdcube_kdcube_status"
    assert (
        paths["/api/v1/kdcube/push"]["post"]["operationId"] == "policy_api_kdcube_kdcube_push_api"
    )
    assert paths["/api/v1/bridge/status"]["post"]["operationId"] == "bridge_api_bridge_status"
    discover = paths["/api/v1/agents/{agent}/mcp/{server_id}/discover"]["post"]
    assert discover["operationId"] == "policy_api_discovery_mcp_discover_post"
