"""The policy API: every status of DESIGN §6 / issue 4 on validate, import, export and the agent
endpoints, and that bad input never becomes a 500.

Over 500 lines on purpose: one file per API router (as test_api_edit.py), sharing its tokens
and bodies."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy.cli import run as cli_run
from policy.domain.yaml_io import WEB_MAX_BYTES, export_text, load_policy
from policy.models import PolicyDraft
from policy.selectors import draft_state
from policy.services import draft_replace

pytestmark = pytest.mark.django_db

VALIDATE = "/api/v1/policy/validate"
IMPORT = "/api/v1/policy/import"
EXPORT = "/api/v1/policy/export.yaml"
YAML = "application/yaml"

POLICY = """\
surfaces:
  as_consumer:
    agents:
      main:
        tools:
          - name: workspace_jobs
            ref: tools/workspace_jobs.py
            alias: workspace_jobs
            allowed: [search, launch_background_job]
            tool_traits:
              search: {strategy: [exploration]}
              launch_background_job:
                strategy: [neutral]
                execution: {trigger: tool_call_complete, concurrency: parallel_with_generation,
                            result_dependency: detached, replay: at_most_once_per_round}
          - {kind: mcp, server_id: browser, alias: browser, allowed: [open_page],
             tool_traits: {open_page: {strategy: [exploitation]}}}
"""
WITH_ERRORS = POLICY.replace("strategy: [exploitation]", "strategy: [bogus]")

REFUSED = {
    "yaml-syntax": ("surfaces: [\n", "yaml-syntax"),
    "duplicate-key": ("surfaces:\n  as_consumer: {agents: {}}\nsurfaces: {}\n", "duplicate-key"),
    "no-agents": ("surfaces:\n  as_consumer: {}\n", "shape"),
    "not-a-mapping": ("- just\n- a list\n", "shape"),
    "only-a-comment": ("# nothing here\n", "shape"),
}
ALIAS_BOMB = (
    "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcde", "bcdef", strict=True)
    )
    + "surfaces: {as_consumer: {agents: {}}}\n"
)
EMPTY_EXPORT_BODY = "surfaces:\n  as_consumer:\n    agents: {}\n"


def post_yaml(client: Client, url: str, text: str | bytes, **extra: Any) -> Any:
    return client.post(url, data=text, content_type=YAML, **extra)


def post_json(client: Client, url: str, data: Any, **extra: Any) -> Any:
    body = data if isinstance(data, str | bytes) else json.dumps(data)
    return client.post(url, data=body, content_type="application/json", **extra)


def codes(response: Any) -> list[str]:
    return [d["code"] for d in response.json()["diagnostics"]]


@pytest.fixture
def api(admin_client: Client) -> Client:
    return admin_client


@pytest.fixture
def imported(api: Client) -> Client:
    response = post_yaml(api, f"{IMPORT}?dry_run=false", POLICY)
    assert response.status_code == 200
    return api


def draft_revision() -> int:
    return draft_state().revision


# --- validate ---------------------------------------------------------------------------------


def test_validate_answers_200_with_diagnostics_and_summary(api: Client) -> None:
    response = post_yaml(api, VALIDATE, POLICY)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"diagnostics", "summary"}
    assert body["summary"]["errors"] == 0


def test_validate_answers_200_for_a_policy_with_errors(api: Client) -> None:
    response = post_yaml(api, VALIDATE, WITH_ERRORS)
    assert response.status_code == 200
    assert response.json()["summary"]["errors"] == 1
    assert "strategy-value" in codes(response)


def test_validate_answers_200_for_unparseable_yaml_with_line_and_column(api: Client) -> None:
    response = post_yaml(api, VALIDATE, "surfaces:\n  as_consumer: {agents: [}\n")
    assert response.status_code == 200
    (diagnostic,) = response.json()["diagnostics"]
    assert diagnostic["code"] == "yaml-syntax"
    assert (diagnostic["line"], diagnostic["column"]) == (2, 26)


@pytest.mark.parametrize("kind", REFUSED)
def test_validate_answers_200_for_text_an_import_would_refuse(kind: str, api: Client) -> None:
    text, code = REFUSED[kind]
    response = post_yaml(api, VALIDATE, text)
    assert response.status_code == 200
    assert code in codes(response)


@pytest.mark.parametrize(
    "content_type",
    ["application/yaml", "application/x-yaml", "text/yaml", "application/yaml; charset=utf-8"],
)
def test_validate_accepts_every_yaml_content_type(content_type: str, api: Client) -> None:
    response = api.post(VALIDATE, data=POLICY, content_type=content_type)
    assert response.status_code == 200


@pytest.mark.parametrize("url", [VALIDATE, IMPORT])
@pytest.mark.parametrize("content_type", ["application/json", "text/plain", "application/xml"])
def test_a_yaml_endpoint_refuses_another_content_type_with_415(
    url: str, content_type: str, api: Client
) -> None:
    response = api.post(url, data=POLICY, content_type=content_type)
    assert response.status_code == 415
    assert "application/yaml" in response.json()["error"]


def test_a_form_post_to_import_is_415_and_changes_nothing(api: Client) -> None:
    response = api.post(f"{IMPORT}?dry_run=false", data={"text": POLICY})
    assert response.status_code == 415
    assert draft_revision() == 0


@pytest.mark.parametrize("url", [VALIDATE, IMPORT, f"{IMPORT}?dry_run=false"])
def test_a_body_over_one_mib_is_413(url: str, api: Client) -> None:
    text = "# " + "x" * (WEB_MAX_BYTES - 2) + "\n"  # one byte over
    response = post_yaml(api, url, text)
    assert response.status_code == 413
    assert "error" in response.json()
    assert draft_revision() == 0


def test_a_body_of_exactly_one_mib_is_read(api: Client) -> None:
    text = POLICY + "# " + "x" * (WEB_MAX_BYTES - len(POLICY) - 3) + "\n"
    assert len(text.encode()) == WEB_MAX_BYTES
    assert post_yaml(api, VALIDATE, text).status_code == 200


@pytest.mark.parametrize("url", [VALIDATE, IMPORT])
def test_aliases_expanding_past_the_node_limit_are_413(url: str, api: Client) -> None:
    response = post_yaml(api, url, ALIAS_BOMB)
    assert response.status_code == 413
    assert "yaml-too-large" in codes(response)


# --- import -----------------------------------------------------------------------------------


def test_import_is_a_dry_run_by_default_and_changes_nothing(api: Client) -> None:
    response = post_yaml(api, IMPORT, POLICY)
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {
        "diagnostics",
        "summary",
        "diff",
        "applied",
        "revision",
        "bundle",
        "policy_bundles",
    }
    assert (body["bundle"], body["policy_bundles"]) == (None, [])  # bundle props, no descriptor
    assert body["applied"] is False
    assert body["revision"] == 0
    assert not PolicyDraft.objects.exists()
    assert api.get(EXPORT).content.decode().endswith(EMPTY_EXPORT_BODY)  # raw: the YAML export


def test_on_a_fresh_instance_the_import_diff_is_taken_against_the_empty_policy(api: Client) -> None:
    diff = post_yaml(api, IMPORT, POLICY).json()["diff"]
    lines = diff.splitlines()
    assert lines[0] == "--- draft (revision 0)"
    assert lines[1] == "+++ import"
    assert "-    agents: {}" in lines
    assert "+      main:" in lines


def test_import_with_dry_run_false_replaces_the_draft(api: Client) -> None:
    response = post_yaml(api, f"{IMPORT}?dry_run=false", POLICY)
    assert response.status_code == 200
    assert response.json()["applied"] is True
    assert response.json()["revision"] == 1
    assert api.get(EXPORT).content.decode() == export_text(load_policy(POLICY).data)


def test_import_applies_text_with_errors_and_reports_them(api: Client) -> None:
    response = post_yaml(api, f"{IMPORT}?dry_run=false", WITH_ERRORS)
    assert response.status_code == 200
    assert response.json()["applied"] is True
    assert response.json()["summary"]["errors"] == 1


def test_importing_the_draft_again_gives_an_empty_diff(imported: Client) -> None:
    exported = imported.get(EXPORT).content
    response = post_yaml(imported, IMPORT, exported)
    assert response.json()["diff"] == ""
    assert "hash-mismatch" not in codes(response)


@pytest.mark.parametrize("dry_run", ["true", "false"])
@pytest.mark.parametrize("kind", REFUSED)
def test_refused_text_is_422_with_diagnostics_and_changes_nothing(
    kind: str, dry_run: str, imported: Client
) -> None:
    before = imported.get(EXPORT).content
    text, code = REFUSED[kind]
    response = post_yaml(imported, f"{IMPORT}?dry_run={dry_run}", text)
    assert response.status_code == 422
    body = response.json()
    assert body["error"].startswith("The text cannot be imported")
    assert code in codes(response)
    assert draft_revision() == 1
    assert imported.get(EXPORT).content == before


def test_a_stale_if_match_is_409_and_changes_nothing(imported: Client) -> None:
    before = imported.get(EXPORT).content
    response = post_yaml(imported, f"{IMPORT}?dry_run=false", WITH_ERRORS, HTTP_IF_MATCH='"0"')
    assert response.status_code == 409
    assert "revision 1" in response.json()["error"]
    assert response.json()["revision"] == 1
    assert imported.get(EXPORT).content == before


def test_a_stale_if_match_on_a_preview_is_409_too(imported: Client) -> None:
    response = post_yaml(imported, IMPORT, WITH_ERRORS, HTTP_IF_MATCH='"7"')
    assert response.status_code == 409


@pytest.mark.parametrize("header", ['"1"', 'W/"1"', "*"])
def test_a_current_if_match_applies(header: str, imported: Client) -> None:
    response = post_yaml(imported, f"{IMPORT}?dry_run=false", WITH_ERRORS, HTTP_IF_MATCH=header)
    assert response.status_code == 200
    assert response.json()["revision"] == 2


@pytest.mark.parametrize("header", ["yesterday", '"\u00b2"', '"-1"'])
def test_a_malformed_if_match_is_400(header: str, api: Client) -> None:
    response = post_yaml(api, f"{IMPORT}?dry_run=false", POLICY, HTTP_IF_MATCH=header)
    assert response.status_code == 400
    assert draft_revision() == 0


def test_a_dry_run_value_that_is_not_a_boolean_is_422(api: Client) -> None:
    response = post_yaml(api, f"{IMPORT}?dry_run=maybe", POLICY)
    assert response.status_code == 422
    assert draft_revision() == 0


# --- export -----------------------------------------------------------------------------------


def test_a_fresh_instance_exports_the_empty_policy_with_its_header(api: Client) -> None:
    response = api.get(EXPORT)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/yaml")
    assert response["Content-Disposition"] == 'attachment; filename="traitdeck-policy.yaml"'
    digest = hashlib.sha256(EMPTY_EXPORT_BODY.encode()).hexdigest()
    expected = f"# traitdeck-format: 1\n# sha256: {digest}\n{EMPTY_EXPORT_BODY}"
    assert response.content.decode() == expected


def test_export_is_byte_identical_to_traitdeck_fmt(imported: Client, tmp_path: Path) -> None:
    source = tmp_path / "p.yaml"
    source.write_text(POLICY, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    assert cli_run(["fmt", str(source)], out, err) == 0
    assert imported.get(EXPORT).content == out.getvalue().encode("utf-8")


# --- agent endpoints --------------------------------------------------------------------------

AGENT_GETS = ["/api/v1/agents/{a}/effective", "/api/v1/agents/{a}/catalog"]


# Predictions follow the runtime, which never refuses an agent id (tool_config._agent_keys):
# an id the draft does not name runs with the default agent's tools, or the built-ins alone.
# Editing routes keep their 404 (tests/policy/test_api_edit.py).


def test_a_prediction_on_a_fresh_instance_offers_the_built_ins_only(api: Client) -> None:
    body = api.get("/api/v1/agents/main/effective").json()
    assert body["resolved_agent"] is None
    assert all(tool_id.startswith("react.") for tool_id in body["tools"])
    assert [d["code"] for d in body["diagnostics"]] == ["agent-resolved"]
    catalog = api.get("/api/v1/agents/main/catalog?format=json").json()
    assert catalog["resolved_agent"] is None


def test_a_dry_run_for_an_agent_the_draft_does_not_name_uses_main(imported: Client) -> None:
    response = post_json(
        imported, "/api/v1/agents/nobody/dry-run", {"turn_id": "t", "iteration": 0, "actions": []}
    )
    assert response.status_code == 200
    assert response.json()["resolved_agent"] == "main"


@pytest.mark.parametrize("url", AGENT_GETS)
def test_a_prediction_for_an_agent_the_draft_does_not_name_uses_main(
    url: str, imported: Client
) -> None:
    named = imported.get(url.format(a="main"))
    other = imported.get(url.format(a="nobody"))
    assert other.status_code == 200
    if url.endswith("effective"):
        assert other.json()["tools"] == named.json()["tools"]
        assert other.json()["resolved_agent"] == "main"
    else:
        assert other.content == named.content


def cli_output(argv: list[str], tmp_path: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    cli_run([str(tmp_path / a) if a in files else a for a in argv], out, err)
    return out.getvalue()


def test_effective_equals_the_cli_json(imported: Client, tmp_path: Path) -> None:
    response = imported.get("/api/v1/agents/main/effective")
    assert response.status_code == 200
    cli = cli_output(
        ["effective", "p.yaml", "--agent", "main", "--format", "json"], tmp_path, {"p.yaml": POLICY}
    )
    assert response.json() == json.loads(cli)
    search = response.json()["tools"]["workspace_jobs.search"]
    assert search["provenance"] == {"strategy": "config agents.main.tools[0].tool_traits.search"}


def test_effective_answers_200_when_trait_keys_are_dates_or_numbers(api: Client) -> None:
    odd = POLICY.replace("search: {strategy: [exploration]}", "search: {2024-01-01: x, 3: y}")
    post_yaml(api, f"{IMPORT}?dry_run=false", odd)
    response = api.get("/api/v1/agents/main/effective")
    assert response.status_code == 200
    assert response.json()["tools"]["workspace_jobs.search"]["traits"] == {
        "2024-01-01": "x",
        "3": "y",
    }


def test_the_text_catalog_is_the_cli_catalog_as_text_plain(
    imported: Client, tmp_path: Path
) -> None:
    response = imported.get("/api/v1/agents/main/catalog")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    cli = cli_output(["catalog", "p.yaml", "--agent", "main"], tmp_path, {"p.yaml": POLICY})
    assert response.content.decode("utf-8") == cli


def test_the_json_catalog_lists_each_tool_with_its_scope(imported: Client) -> None:
    response = imported.get("/api/v1/agents/main/catalog?format=json")
    assert response.status_code == 200
    tools = response.json()["tools"]
    assert tools[0] == {
        "id": "workspace_jobs.search",
        "scope": "   Scope:\n       \u2022 strategy: exploration\n",
    }
    assert tools[-1]["id"] == "react.delegate"


def test_an_unknown_catalog_format_is_422(imported: Client) -> None:
    assert imported.get("/api/v1/agents/main/catalog?format=xml").status_code == 422


def test_the_compact_catalog_is_the_cli_compact_catalog(imported: Client, tmp_path: Path) -> None:
    response = imported.get("/api/v1/agents/main/catalog?detail=compact")
    assert response.status_code == 200
    text = response.content.decode("utf-8")
    # raw: the catalog is plain text, as the runtime's prompt holds it.
    assert text.startswith("[AVAILABLE TOOLS] [COMPACT]\nThis catalog: ")
    assert "Scope:" not in text  # raw: (the same plain text)
    argv = ["catalog", "p.yaml", "--agent", "main", "--detail", "compact"]
    assert text == cli_output(argv, tmp_path, {"p.yaml": POLICY})


def test_the_json_catalog_says_which_form_applies_and_where_from(imported: Client) -> None:
    data = imported.get("/api/v1/agents/main/catalog?format=json&detail=compact").json()
    assert data["detail"] == "compact"
    assert data["text"].startswith("[AVAILABLE TOOLS] [COMPACT]\n")
    assert (data["default_detail"], data["default_detail_source"]) == (
        "full",
        "the runtime's default",
    )
    assert data["include_tool_catalog"] is True
    assert "purpose line" in data["omitted"]
    assert imported.get("/api/v1/agents/main/catalog?format=json").json()["detail"] == "full"


def test_an_unknown_catalog_detail_is_422_and_says_the_two_forms(imported: Client) -> None:
    response = imported.get("/api/v1/agents/main/catalog?detail=wide")
    assert response.status_code == 422
    assert "full or compact" in response.json()["error"]


ROUND = {
    "turn_id": "turn-1",
    "iteration": 2,
    "max_actions": 3,
    "attempts": [
        [
            {
                "action": "call_tool",
                "tool_id": "react.delegate",
                "params": {"charter": "A", "agent_alias": "strong_agent"},
            },
            {"action": "call_tool", "tool_id": "workspace_jobs.search", "params": {}},
            {"action": "call_tool", "tool_id": "mcp.browser.open_page", "params": {}},
        ],
        [
            {"action": "call_tool", "tool_id": "workspace_jobs.search", "params": {}},
            {
                "action": "call_tool",
                "tool_id": "react.delegate",
                "params": {"agent_alias": "strong_agent", "charter": "A"},
            },
        ],
    ],
}


def test_dry_run_answers_exactly_what_the_cli_prints(imported: Client, tmp_path: Path) -> None:
    response = post_json(imported, "/api/v1/agents/main/dry-run", ROUND)
    assert response.status_code == 200
    cli = cli_output(
        ["dry-run", "p.yaml", "--agent", "main", "--round", "r.json", "--format", "json"],
        tmp_path,
        {"p.yaml": POLICY, "r.json": json.dumps(ROUND)},
    )
    assert response.json() == json.loads(cli)
    first, second = (a["actions"] for a in response.json()["attempts"])
    assert first[0]["tool_call_id"] == "tc_5ca55cec48db"
    assert first[2]["code"] == "multi_action_bundle_strategy_incompatible"
    assert first[2]["extra"]["first_tool_id"] == "workspace_jobs.search"
    assert (second[1]["ledger"], second[1]["match"]) == ("dedup", "fingerprint")


def test_dry_run_says_which_react_agent_it_assumed(imported: Client) -> None:
    response = post_json(imported, "/api/v1/agents/main/dry-run?react_version=v2", ROUND)
    assert response.status_code == 200
    data = response.json()
    assert (data["react_version"], data["react_version_source"]) == ("v2", "the explicit choice")
    assert data["attempts"][0]["decision"]["channel_instances"] == len(ROUND["attempts"][0])
    assert not any(a["early"] for attempt in data["attempts"] for a in attempt["actions"])
    refused = post_json(imported, "/api/v1/agents/main/dry-run?react_version=v9", ROUND)
    assert refused.status_code == 422
    assert refused.json()["error"] == "react_version must be v2 or v3."


def test_dry_run_reads_the_rounds_code_channel(imported: Client) -> None:
    data = post_json(imported, "/api/v1/agents/main/dry-run?react_version=v3", ROUND).json()
    assert data["exec_code_complete"] is True
    said = {**ROUND, "exec_code_complete": False}
    data = post_json(imported, "/api/v1/agents/main/dry-run?react_version=v3", said).json()
    assert data["exec_code_complete"] is False
    refused = post_json(imported, "/api/v1/agents/main/dry-run", {**ROUND, "exec_code_complete": 1})
    assert refused.status_code == 422
    assert "exec_code_complete must be true or false" in refused.json()["error"]


@pytest.mark.parametrize(
    "body",
    ["{not json", b"\xff\xfe{}", "[" * 50_000 + "]" * 50_000, " "],
    ids=["syntax", "not-utf8", "deep", "empty"],
)
def test_a_dry_run_body_that_is_not_json_is_400(body: str | bytes, imported: Client) -> None:
    response = post_json(imported, "/api/v1/agents/main/dry-run", body)
    assert response.status_code == 400
    assert response.json()["error"].startswith("The body is not valid JSON")


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"iteration": 0, "actions": []},
        {"turn_id": "t", "iteration": "0", "actions": []},
        {"turn_id": "t", "iteration": 0},
        {"turn_id": "t", "iteration": 0, "actions": [{"tool_id": "x"}]},
        {"turn_id": "t", "iteration": 0, "attempts": []},
    ],
    ids=["list", "no-turn", "string-iteration", "no-actions", "no-action", "no-attempt"],
)
def test_a_malformed_round_is_422(data: Any, imported: Client) -> None:
    response = post_json(imported, "/api/v1/agents/main/dry-run", data)
    assert response.status_code == 422
    assert response.json()["error"].startswith("The round is malformed")


def test_a_dry_run_in_yaml_is_415(imported: Client) -> None:
    response = post_yaml(imported, "/api/v1/agents/main/dry-run", json.dumps(ROUND))
    assert response.status_code == 415


def test_a_dry_run_body_over_one_mib_is_413(imported: Client) -> None:
    padding = "x" * WEB_MAX_BYTES
    response = post_json(imported, "/api/v1/agents/main/dry-run", {**ROUND, "pad": padding})
    assert response.status_code == 413


# --- authentication and CSRF --------------------------------------------------------------------

ENDPOINTS = [
    ("post", VALIDATE, YAML),
    ("post", IMPORT, YAML),
    ("get", EXPORT, None),
    ("get", "/api/v1/agents/main/effective", None),
    ("get", "/api/v1/agents/main/catalog", None),
    ("post", "/api/v1/agents/main/dry-run", "application/json"),
]


@pytest.mark.parametrize(("method", "url", "content_type"), ENDPOINTS)
def test_anonymous_calls_get_401_json_never_a_redirect(
    method: str, url: str, content_type: str | None, client: Client
) -> None:
    kwargs: dict[str, Any] = {"data": "{}", "content_type": content_type} if content_type else {}
    response = getattr(client, method)(url, **kwargs)
    assert response.status_code == 401
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["error"].startswith("Authentication required")


@pytest.fixture
def csrf_client(admin_user: AbstractBaseUser) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    return client


@pytest.mark.parametrize(
    ("method", "url", "content_type"), [e for e in ENDPOINTS if e[0] == "post"]
)
def test_a_session_post_without_the_csrf_header_is_403(
    method: str, url: str, content_type: str, csrf_client: Client
) -> None:
    response = csrf_client.post(url, data="{}", content_type=content_type)
    assert response.status_code == 403
    assert response.json() == {"error": "CSRF check Failed"} or "CSRF" in response.json()["error"]
    assert draft_revision() == 0


def test_a_session_post_with_the_csrf_header_is_accepted(csrf_client: Client) -> None:
    csrf_client.get("/")  # the page sets the csrftoken cookie
    token = csrf_client.cookies["csrftoken"].value
    response = csrf_client.post(
        f"{IMPORT}?dry_run=false", data=POLICY, content_type=YAML, HTTP_X_CSRFTOKEN=token
    )
    assert response.status_code == 200
    assert draft_revision() == 1


# --- never a 500 --------------------------------------------------------------------------------

yaml_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-3, 3),
        st.text(max_size=6),
        st.sampled_from(["neutral", "exploration", "exploitation", "*", "mcp", "named_service"]),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(
                ["kind", "alias", "ref", "allowed", "tool_traits", "strategy", "execution", "x"]
            ),
            inner,
            max_size=4,
        ),
    ),
    max_leaves=20,
)
policies = yaml_values.map(
    lambda tools: yaml.safe_dump(
        {"surfaces": {"as_consumer": {"agents": {"main": {"tools": [tools]}}}}}
    )
)
# Non-empty: Django's test client drops the content type of an empty body (a 415 then).
bodies = st.one_of(st.binary(min_size=1, max_size=300), st.text(min_size=1, max_size=300), policies)


def test_random_bodies_never_make_validate_or_import_fail_with_a_500(
    admin_user: AbstractBaseUser,
) -> None:
    client = Client()
    client.force_login(admin_user)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(body=bodies, url=st.sampled_from([VALIDATE, IMPORT, f"{IMPORT}?dry_run=false"]))
    def check(body: str | bytes, url: str) -> None:
        response = post_yaml(client, url, body)
        assert response.status_code in {200, 413, 422}, response.content[:300]
        assert "diagnostics" in response.json()

    check()


def test_random_rounds_never_make_the_dry_run_fail_with_a_500(
    admin_user: AbstractBaseUser,
) -> None:
    client = Client()
    client.force_login(admin_user)
    draft_replace(data=load_policy(POLICY).data, base_revision=None)
    json_values = st.recursive(
        st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "turn_id",
                        "iteration",
                        "actions",
                        "attempts",
                        "action",
                        "tool_id",
                        "params",
                        "max_actions",
                    ]
                ),
                inner,
                max_size=5,
            )
        ),
        max_leaves=25,
    )

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(body=json_values | st.binary(min_size=1, max_size=100))
    def check(body: Any) -> None:
        raw = body if isinstance(body, bytes) else json.dumps(body)
        response = post_json(client, "/api/v1/agents/main/dry-run", raw)
        assert response.status_code in {200, 400, 422}, response.content[:300]

    check()
