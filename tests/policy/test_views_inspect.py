"""The effective-traits page, the catalog preview and the playground of one agent.

Over 500 lines on purpose: the three pages answer the same question (what the runtime makes of
one agent) from the same draft and manifests, set up once here."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import AbstractBaseUser
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy.cli import run as cli_run
from policy.domain.yaml_io import load_policy
from policy.selectors import draft_state
from policy.services import draft_replace, manifest_upload
from tests.markup import (
    Element,
    assert_alert,
    document,
    find,
    find_all,
    first_element,
    is_fragment,
    text_of,
)

pytestmark = pytest.mark.django_db

POLICY = """\
surfaces:
  as_consumer:
    agents:
      main:
        tools:
          - name: workspace_jobs
            ref: tools/workspace_jobs.py
            alias: workspace_jobs
            allowed: [search, export_report, launch_background_job]
            tool_traits:
              search: {strategy: [exploration], note: "<b>reads</b> & lists"}
              launch_background_job:
                strategy: [neutral]
                execution: {trigger: tool_call_complete, concurrency: parallel_with_generation,
                            result_dependency: detached, replay: at_most_once_per_round}
            tool_execution:
              export_report: {timeout_s: 20, mode: sync, retry: idempotency_key}
          - {kind: mcp, server_id: browser, alias: browser, allowed: [open_page, click],
             tool_traits: {open_page: {strategy: [exploitation]}}}
          - kind: named_service
            alias: named_services
            namespaces:
              task:
                allowed: [object.search]
                tool_traits: {search_objects: {strategy: [exploitation]}}
            tool_traits: {search_objects: {strategy: [exploration]}}
"""
DELEGATE_PARAMS = '{"charter": "A", "agent_alias": "strong_agent"}'
DELEGATE_REORDERED = '{"agent_alias": "strong_agent", "charter": "A"}'


@pytest.fixture
def web(admin_client: Client) -> Client:
    draft_replace(data=load_policy(POLICY).data, base_revision=None)
    return admin_client


def page(response: Any) -> str:
    return response.content.decode("utf-8")


def pre(response: Any, element_id: str) -> str:
    """The text of ``<pre id=…>`` as a browser shows it (entities decoded)."""
    return find(page(response), "pre", id=element_id).raw_text


def row(response: Any, tool_id: str) -> Element:
    return find(page(response), "tr", data_tool=tool_id)


def cli(argv: list[str], tmp_path: Path, round_spec: Any = None) -> str:
    """The CLI run on the exported draft (and the round, when given)."""
    (tmp_path / "draft.yaml").write_text(draft_state().text, encoding="utf-8")
    (tmp_path / "r.json").write_text(json.dumps(round_spec), encoding="utf-8")
    paths = {"FILE": str(tmp_path / "draft.yaml"), "ROUND": str(tmp_path / "r.json")}
    out, err = io.StringIO(), io.StringIO()
    cli_run([paths.get(a, a) for a in argv], out, err)
    return out.getvalue()


# --- effective traits ---------------------------------------------------------------------------


def test_the_effective_page_lists_configured_tools_then_builtins(web: Client) -> None:
    text = page(web.get("/policy/agents/main/effective/"))
    configured = find(text, "table", id="configured-tools").find_all("tr", data_tool=None)
    builtins = find(text, "table", id="builtin-tools").find_all("tr", data_tool=None)
    configured_ids = [tool.attrs["data-tool"] for tool in configured]
    assert {"workspace_jobs.search", "named_services.search_objects"} <= set(configured_ids)
    builtin_ids = [tool.attrs["data-tool"] for tool in builtins]
    assert builtin_ids.index("react.read") < builtin_ids.index("react.delegate")
    order = document(text).iter()
    assert order.index(configured[-1]) < order.index(builtins[0])


def test_each_trait_key_shows_where_it_comes_from(web: Client) -> None:
    response = web.get("/policy/agents/main/effective/")
    search = row(response, "workspace_jobs.search")
    provenance = [code.text for code in search.find_all("code", class_="provenance")]
    assert "config agents.main.tools[0].tool_traits.search" in provenance
    assert "exploration" in search.text
    # An extension key is kept and shown as-is (escaped, never as markup).
    assert "<b>reads</b> & lists" in search.text
    assert not search.find_all("b")
    assert "builtin react.delegate" in row(response, "react.delegate").text


def test_a_manifest_trait_shows_manifest_provenance(web: Client) -> None:
    manifest_upload(
        agent="main",
        data={"mcp.browser.click": {"tool_traits": {"strategy": ["exploration"], "cost": "low"}}},
    )
    click = row(web.get("/policy/agents/main/effective/"), "mcp.browser.click")
    assert "manifest mcp.browser.click" in click.text
    assert "low" in click.text


def test_the_early_column_says_which_tools_start_early(web: Client) -> None:
    response = web.get("/policy/agents/main/effective/")
    early = {"workspace_jobs.launch_background_job", "react.delegate"}
    for tool_id in [*early, "workspace_jobs.search"]:
        chips = [chip.text for chip in row(response, tool_id).find_all("span", class_="early")]
        assert chips == (["yes — starts early"] if tool_id in early else []), tool_id


def test_the_execution_design_and_namespace_overrides_are_shown(web: Client) -> None:
    response = web.get("/policy/agents/main/effective/")
    report = row(response, "workspace_jobs.export_report")
    design = report.find("dl", class_="design")
    assert "timeout_s" in [key.text for key in design.find_all("dt")]
    assert "idempotency_key" in design.text
    assert "runs alone" in report.text  # no strategy: unknown
    named = row(response, "named_services.search_objects")
    [override] = named.find("ul", class_="overrides").find_all("li")
    assert override.find("code").text == "task"
    assert "strategy: exploitation" in override.text


@pytest.mark.parametrize("view", ["effective", "catalog", "playground"])
def test_an_unknown_agent_is_404(view: str, web: Client) -> None:
    assert web.get(f"/policy/agents/nobody/{view}/").status_code == 404


@pytest.mark.parametrize("view", ["effective", "catalog", "playground"])
def test_agent_pages_are_404_on_a_fresh_instance(view: str, admin_client: Client) -> None:
    assert admin_client.get(f"/policy/agents/main/{view}/").status_code == 404


@pytest.mark.parametrize("view", ["effective", "catalog", "playground"])
def test_agent_pages_need_a_login(view: str, client: Client) -> None:
    response = client.get(f"/policy/agents/main/{view}/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


def test_an_htmx_navigation_gets_only_the_page_content(web: Client) -> None:
    response = web.get("/policy/agents/main/effective/", HTTP_HX_REQUEST="true")
    assert is_fragment(page(response))
    assert find(page(response), "table", id="configured-tools")


# --- catalog preview ----------------------------------------------------------------------------


def test_the_catalog_preview_is_byte_identical_to_the_api_text_catalog(web: Client) -> None:
    shown = pre(web.get("/policy/agents/main/catalog/"), "catalog")
    api = web.get("/api/v1/agents/main/catalog").content.decode("utf-8")
    assert shown == api
    assert "       \u2022 note: <b>reads</b> & lists\n" in shown


def test_the_catalog_preview_equals_traitdeck_catalog(web: Client, tmp_path: Path) -> None:
    shown = pre(web.get("/policy/agents/main/catalog/"), "catalog")
    assert shown == cli(["catalog", "FILE", "--agent", "main"], tmp_path)


def test_the_compact_preview_is_the_api_and_cli_compact_text(web: Client, tmp_path: Path) -> None:
    response = web.get("/policy/agents/main/catalog/?detail=compact")
    shown = pre(response, "catalog")
    assert shown.startswith("[AVAILABLE TOOLS] [COMPACT]\n")
    assert shown == web.get("/api/v1/agents/main/catalog?detail=compact").content.decode("utf-8")
    assert shown == cli(["catalog", "FILE", "--agent", "main", "--detail", "compact"], tmp_path)
    assert "purpose line" in text_of(page(response), "p", id="compact-omits")


def test_the_preview_marks_the_default_form_and_no_catalog(web: Client) -> None:
    data = load_policy(POLICY).data
    data["react"] = {
        "main": {"instructions": {"tool_catalog_detail": "compact", "include_tool_catalog": "no"}}
    }
    draft_replace(data=data, base_revision=draft_state().revision)
    response = web.get("/policy/agents/main/catalog/")
    forms = text_of(page(response), "p", id="catalog-form")
    assert "reads the compact catalog" in forms
    assert "react.main.instructions.tool_catalog_detail" in forms
    assert pre(response, "catalog").startswith("[AVAILABLE TOOLS] [COMPACT]\n")
    warning = text_of(page(response), "p", id="no-catalog")
    assert "No catalog" in warning
    assert "react.main.instructions.include_tool_catalog" in warning


def test_the_catalog_preview_shows_namespace_overrides(web: Client) -> None:
    shown = pre(web.get("/policy/agents/main/catalog/"), "catalog")
    assert (
        "       \u2022 strategy: exploration (default)\n"
        "       \u2022 strategy overrides by namespace:\n"
        "           - task: exploitation\n"
    ) in shown


# --- playground -----------------------------------------------------------------------------------


def form(*attempts: list[tuple[str, str]], op: str = "run", **fields: str) -> dict[str, str]:
    """The playground form as the browser posts it: a0-0-tool, a0-0-params, …"""
    data = {"turn_id": "turn-1", "iteration": "2", "max_actions": "", "op": op}
    data["attempt_count"] = str(len(attempts))
    for a, actions in enumerate(attempts):
        for i, (tool, params) in enumerate(actions):
            data[f"a{a}-{i}-tool"] = tool
            data[f"a{a}-{i}-params"] = params
    return {**data, **fields}


def action_values(response: Any) -> list[list[tuple[str, str]]]:
    """What the re-rendered form holds: per attempt, (selected choice, params text)."""
    attempts: list[list[tuple[str, str]]] = []
    for fieldset in find_all(page(response), "fieldset", class_="attempt"):
        actions = []
        for block in fieldset.find_all("div", class_="pg-action"):
            selected = [o for o in block.find("select").find_all("option") if "selected" in o.attrs]
            assert len(selected) == 1, block
            actions.append((selected[0].value, block.find("textarea").value))
        attempts.append(actions)
    return attempts


PLAYGROUND = "/policy/agents/main/playground/"


def test_the_playground_offers_the_agents_tools_and_the_final_answers(web: Client) -> None:
    text = page(web.get(PLAYGROUND))
    offered = [option.value for option in find(text, "select", name="a0-0-tool").find_all("option")]
    for choice in ["workspace_jobs.search", "mcp.browser.click", "react.delegate"]:
        assert choice in offered
    assert offered[-2:] == ["complete", "exit"]
    assert action_values(web.get(PLAYGROUND)) == [[("workspace_jobs.search", "{}")]]


def test_a_tool_in_the_query_string_is_preselected(web: Client) -> None:
    response = web.get(f"{PLAYGROUND}?tool=react.delegate")
    assert action_values(response) == [[("react.delegate", "{}")]]


def test_running_a_round_shows_verdicts_early_start_and_ledger_identity(web: Client) -> None:
    response = web.post(
        PLAYGROUND,
        form([("react.delegate", DELEGATE_PARAMS), ("workspace_jobs.search", "{}")]),
    )
    assert response.status_code == 200
    results = find(page(response), "section", id="results")
    [first, second] = results.find_all("tr", class_="verdict")
    assert first.find("span", class_="early").text == "starts early"
    assert first.find("code", class_="tool-call-id").text == "tc_5ca55cec48db"
    fingerprint = "40b78e51de2d48e9f19370949ed7eafe6594198e5a75bc7896e0cd02e0a4681f"
    assert first.find("code", class_="fingerprint").text == fingerprint
    # Both pass the overseer while streaming; with multi-action off (the default) the channel
    # streamer reads the two action channels as multiple_channel_instances: nothing of the
    # decision runs (recorded, conformance family v3off), the early start already did.
    verdicts = [
        [" ".join(cell.text.split()) for cell in row.find_all("td", class_=stage)]
        for row in (first, second)
        for stage in ("online", "backstop", "final")
    ]
    rejected = ["rejected action_schema_error"]
    assert verdicts == [["accepted"], ["—"], rejected, ["accepted"], ["—"], rejected]
    assert "multiple_channel_instances:2" in first.find("td", class_="explanation").text
    assert results.find("p", id="multi-off-note").text.startswith("Multi-action is off")


def test_under_v2_two_actions_run_nothing_and_the_page_says_which_agent_it_assumed(
    web: Client, settings: Any
) -> None:
    # The server's setting (KDCube's default v2) applies when the select says nothing.
    settings.TRAITDECK_REACT_AGENT_VERSION = "v2"
    response = web.post(
        PLAYGROUND, form([("react.delegate", DELEGATE_PARAMS), ("workspace_jobs.search", "{}")])
    )
    results = find(page(response), "section", id="results")
    assert results.find("span", id="version-badge").text == "v2"
    assert "TRAITDECK_REACT_AGENT_VERSION" in results.find("p", id="result-version").text
    assert results.find("p", id="v2-note").text.startswith("The v2 agent takes one action")
    assert not results.find_all("p", id="multi-off-note")
    assert "nothing runs; the model is asked again" in results.find("p", class_="v2-decision").text
    result = json.loads(pre(response, "result-json"))
    actions = result["attempts"][0]["actions"]
    assert [(a["verdict"], a["early"]) for a in actions] == [("rejected", False)] * 2
    # The select wins over the setting.
    response = web.post(
        PLAYGROUND,
        form(
            [("react.delegate", DELEGATE_PARAMS), ("workspace_jobs.search", "{}")],
            react_version="v3",
        ),
    )
    assert find(page(response), "span", id="version-badge").text == "v3"
    assert json.loads(pre(response, "result-json"))["react_version_source"] == (
        "the explicit choice"
    )


def test_with_multi_action_on_both_actions_run_and_the_backstop_is_shown(web: Client) -> None:
    response = web.post(
        PLAYGROUND,
        form(
            [("react.delegate", DELEGATE_PARAMS), ("workspace_jobs.search", "{}")],
            multi_action_mode="safe_fanout",
        ),
    )
    result = json.loads(pre(response, "result-json"))
    assert result["multi_action_mode"] == "on"
    actions = result["attempts"][0]["actions"]
    assert [a["verdict"] for a in actions] == ["accepted", "accepted"]
    assert [a["backstop"]["verdict"] for a in actions] == ["accepted", "accepted"]
    assert find(page(response), "section", id="results")
    assert not find_all(page(response), id="multi-off-note")


def test_a_rejection_is_explained_in_words(web: Client) -> None:
    response = web.post(
        PLAYGROUND, form([("workspace_jobs.search", "{}"), ("mcp.browser.open_page", "{}")])
    )
    rejected = find(page(response), "section", id="results").find_all("tr", data_index="1")[0]
    assert rejected.find("code", class_="code").text == "multi_action_bundle_strategy_incompatible"
    explanation = rejected.find("td", class_="explanation").text
    assert "workspace_jobs.search (exploration) was accepted first; mcp.browser.open_page" in (
        explanation
    )
    assert "first_tool_id=workspace_jobs.search" in explanation


def test_the_raw_json_equals_the_cli_dry_run_json(web: Client, tmp_path: Path) -> None:
    response = web.post(
        PLAYGROUND,
        form(
            [("react.delegate", DELEGATE_PARAMS), ("workspace_jobs.search", "{}")],
            [("workspace_jobs.search", "{}"), ("react.delegate", DELEGATE_REORDERED)],
            max_actions="3",
        ),
    )
    round_spec = json.loads(pre(response, "round-json"))
    assert round_spec == {
        "turn_id": "turn-1",
        "iteration": 2,
        "max_actions": 3,
        "attempts": [
            [
                {
                    "action": "call_tool",
                    "tool_id": "react.delegate",
                    "params": json.loads(DELEGATE_PARAMS),
                },
                {"action": "call_tool", "tool_id": "workspace_jobs.search", "params": {}},
            ],
            [
                {"action": "call_tool", "tool_id": "workspace_jobs.search", "params": {}},
                {
                    "action": "call_tool",
                    "tool_id": "react.delegate",
                    "params": json.loads(DELEGATE_REORDERED),
                },
            ],
        ],
    }
    expected = cli(
        ["dry-run", "FILE", "--agent", "main", "--round", "ROUND", "--format", "json"],
        tmp_path,
        round_spec,
    )
    assert pre(response, "result-json") == expected


def attempt_ledgers(response: Any, attempt: int) -> list[str]:
    """The ledger column of one attempt's verdict rows (0: the first attempt), as read."""
    rows = find(page(response), "section", id="results").find_all("tr", class_="verdict")
    return [
        row.find("td", class_="ledger").text
        for row in rows
        if row.attrs["data-attempt"] == str(attempt)
    ]


def test_a_provider_retry_that_reorders_shows_a_dedup_by_fingerprint(web: Client) -> None:
    response = web.post(
        PLAYGROUND,
        form(
            [("react.delegate", DELEGATE_PARAMS), ("workspace_jobs.search", "{}")],
            [("workspace_jobs.search", "{}"), ("react.delegate", DELEGATE_REORDERED)],
        ),
    )
    ledger = attempt_ledgers(response, 1)
    # The delegate, now second, is the first attempt's first call: the same fingerprint.
    assert ledger[1].startswith("dedup reuses tc_5ca55cec48db, matched by fingerprint:")


def test_the_same_slot_in_a_retry_is_a_dedup_by_slot(web: Client) -> None:
    response = web.post(
        PLAYGROUND,
        form([("react.delegate", DELEGATE_PARAMS)], [("react.delegate", '{"charter": "B"}')]),
    )
    [ledger] = attempt_ledgers(response, 1)
    assert ledger.startswith("dedup reuses tc_")
    assert ", matched by slot: not executed again" in ledger


def test_empty_params_send_no_params_which_the_runtime_reads_as_empty(web: Client) -> None:
    # Measured on the runtime: a call without params counts as {} and still starts early.
    response = web.post(PLAYGROUND, form([("react.delegate", "")]))
    result = json.loads(pre(response, "result-json"))
    (action,) = result["attempts"][0]["actions"]
    assert action["verdict"] == "accepted"
    assert action["early"] is True
    assert "params" not in json.loads(pre(response, "round-json"))["attempts"][0][0]


def test_final_answers_are_sent_as_complete_or_exit_with_their_text(web: Client) -> None:
    response = web.post(
        PLAYGROUND,
        form([("react.hide", "{}"), ("complete", "All done.")], multi_action_mode="on"),
    )
    sent = json.loads(pre(response, "round-json"))["attempts"][0][1]
    assert sent == {"action": "complete", "final_answer": "All done."}
    final = json.loads(pre(response, "result-json"))["attempts"][0]["actions"][1]
    assert (final["action"], final["tool_id"], final["verdict"]) == ("complete", None, "accepted")


def test_a_final_answer_without_text_is_rejected_after_generation(web: Client) -> None:
    response = web.post(
        PLAYGROUND, form([("react.hide", "{}"), ("exit", "")], multi_action_mode="on")
    )
    final = json.loads(pre(response, "result-json"))["attempts"][0]["actions"][1]
    assert final["online"]["verdict"] == "accepted"
    assert (final["verdict"], final["code"]) == ("rejected", "final_answer_required")


def test_invalid_json_params_get_a_message_on_that_action_not_a_500(web: Client) -> None:
    response = web.post(
        PLAYGROUND, form([("react.delegate", DELEGATE_PARAMS), ("workspace_jobs.search", "{oops")])
    )
    assert response.status_code == 422
    text = page(response)
    error = find(text, "p", id="a0-1-error")
    assert error.text.startswith("The params are not valid JSON (line 1, column 2)")
    assert find(text, "textarea", name="a0-1-params").attrs["aria-describedby"] == "a0-1-error"
    assert not find_all(text, id="a0-0-error")
    assert not find_all(text, id="results")
    # What the admin typed is kept so it can be fixed.
    assert action_values(response) == [
        [("react.delegate", DELEGATE_PARAMS), ("workspace_jobs.search", "{oops")]
    ]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"iteration": "two"}, "The iteration is a whole number, 0 or more."),
        ({"iteration": "-1"}, "The iteration is a whole number, 0 or more."),
        ({"turn_id": "  "}, "Give a turn id"),
        ({"max_actions": "many"}, "The cap is a whole number"),
    ],
)
def test_bad_round_fields_get_a_message_not_a_500(
    fields: dict[str, str], message: str, web: Client
) -> None:
    response = web.post(PLAYGROUND, form([("react.hide", "{}")], **fields))
    assert response.status_code == 422
    assert_alert(page(response), message)


@pytest.mark.parametrize(("cap", "online"), [("0", 2), ("-1", 1)])
def test_a_cap_of_zero_means_two_and_a_negative_cap_means_one(
    web: Client, cap: str, online: int
) -> None:
    paths = '{"paths": ["a"]}'
    actions = [("react.read", paths), ("react.read", paths), ("react.read", paths)]
    response = web.post(PLAYGROUND, form(actions, max_actions=cap))
    result = json.loads(pre(response, "result-json"))
    assert result["max_actions"] == online
    verdicts = [a["online"]["verdict"] for a in result["attempts"][0]["actions"]]
    assert verdicts == ["accepted"] * online + ["rejected"] + ["not_observed"] * (2 - online)


def test_a_run_over_htmx_answers_with_the_workspace_only(web: Client) -> None:
    response = web.post(PLAYGROUND, form([("react.hide", "{}")]), HTTP_HX_REQUEST="true")
    text = page(response)
    assert response.status_code == 200
    assert is_fragment(text)
    assert first_element(text).matches("div", {"id": "playground"})
    assert first_element(text).find("section", id="results")


def test_add_action_appends_a_row_with_the_default_tool(web: Client) -> None:
    response = web.post(PLAYGROUND, form([("react.hide", "{}")], op="add-action:0"))
    assert response.status_code == 200
    assert action_values(response) == [[("react.hide", "{}"), ("workspace_jobs.search", "{}")]]
    assert not find_all(page(response), id="results")


def test_remove_action_drops_that_row(web: Client) -> None:
    actions = [("react.hide", "{}"), ("react.read", '{"p": 1}'), ("complete", "")]
    response = web.post(PLAYGROUND, form(actions, op="remove-action:0:1"))
    assert action_values(response) == [[("react.hide", "{}"), ("complete", "")]]


@pytest.mark.parametrize(
    ("op", "order"),
    [
        ("up:0:1", ["react.read", "react.hide", "complete"]),
        ("down:0:1", ["react.hide", "complete", "react.read"]),
    ],
)
def test_actions_can_be_moved_up_and_down(op: str, order: list[str], web: Client) -> None:
    actions = [("react.hide", "{}"), ("react.read", "{}"), ("complete", "")]
    response = web.post(PLAYGROUND, form(actions, op=op))
    assert [choice for choice, _ in action_values(response)[0]] == order


def test_add_a_second_attempt_copies_the_first_attempts_actions(web: Client) -> None:
    first = [("react.delegate", DELEGATE_PARAMS), ("workspace_jobs.search", '{"q": "x"}')]
    response = web.post(PLAYGROUND, form(first, op="add-attempt"))
    assert action_values(response) == [first, first]
    legend = find(page(response), "fieldset", id="attempt-1").find("legend")
    assert "a provider retry" in legend.text
    assert find(page(response), "input", name="attempt_count").value == "2"


def test_a_retry_attempt_can_be_removed_but_not_the_first(web: Client) -> None:
    actions = [("react.hide", "{}")]
    removed = web.post(PLAYGROUND, form(actions, [("react.read", "{}")], op="remove-attempt:1"))
    assert action_values(removed) == [actions]
    kept = web.post(PLAYGROUND, form(actions, op="remove-attempt:0"))
    assert action_values(kept) == [actions]


def test_an_attempt_with_no_actions_runs_and_says_so(web: Client) -> None:
    response = web.post(PLAYGROUND, form([("react.hide", "{}")], op="remove-action:0:0"))
    assert action_values(response) == [[]]
    ran = web.post(
        PLAYGROUND, {"turn_id": "t", "iteration": "0", "attempt_count": "1", "op": "run"}
    )
    assert ran.status_code == 200
    assert "No actions: nothing to decide." in text_of(page(ran), "section", id="results")


def test_a_tool_the_agent_does_not_have_stays_selected_and_resolves_unknown(web: Client) -> None:
    response = web.post(PLAYGROUND, form([("mcp.gone.tool", "{}")]))
    assert action_values(response) == [[("mcp.gone.tool", "{}")]]
    result = json.loads(pre(response, "result-json"))
    assert result["attempts"][0]["actions"][0]["strategy"] == ["unknown"]


FIELD_NAMES = [
    "turn_id",
    "iteration",
    "max_actions",
    "attempt_count",
    "op",
    "a0-0-tool",
    "a0-0-params",
    "a0-1-tool",
    "a1-0-params",
    "a999-999-tool",
    "a1-5-params",
]
FIELD_VALUES = st.one_of(
    st.text(max_size=12),
    st.sampled_from(
        [
            "run",
            "add-attempt",
            "add-action:0",
            "up:0:1",
            "down:0:0",
            "remove-attempt:1",
            "remove-action:3:9",
            "react.delegate",
            "complete",
            "{}",
            "[",
            "99",
            "\u00b2",
            "-5",
        ]
    ),
)


def test_random_playground_posts_never_fail_with_a_500(admin_user: AbstractBaseUser) -> None:
    draft_replace(data=load_policy(POLICY).data, base_revision=None)
    client = Client()
    client.force_login(admin_user)

    @settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.dictionaries(st.sampled_from(FIELD_NAMES), FIELD_VALUES, max_size=8))
    def check(data: dict[str, str]) -> None:
        response = client.post(PLAYGROUND, data)
        assert response.status_code in {200, 422}, data

    check()


@pytest.mark.parametrize(
    ("role", "present", "absent"),
    [
        ("parent", "react.delegate", "react.contribute"),
        ("child", "react.contribute", "react.delegate"),
    ],
)
def test_the_effective_and_catalog_views_show_the_built_ins_of_the_chosen_role(
    web: Client, role: str, present: str, absent: str
) -> None:
    effective = page(web.get(f"/policy/agents/main/effective/?role={role}"))
    assert find(effective, "tr", data_tool=present)
    assert not find_all(effective, "tr", data_tool=absent)
    assert find(effective, "select", name="role").value == role
    listed = pre(web.get(f"/policy/agents/main/catalog/?role={role}"), "catalog")
    assert f"] {present}\n" in listed
    assert f"] {absent}\n" not in listed


def test_the_effective_view_lists_where_a_named_service_tool_applies(web: Client) -> None:
    text = page(web.get("/policy/agents/main/effective/"))
    named = find(text, "tr", data_tool="named_services.search_objects")
    assert named.find("div", class_="applicable").text == "namespaces applicable: task"


def test_a_playground_round_can_be_saved_as_a_regression_case(web: Client) -> None:
    response = web.post(PLAYGROUND, form([("workspace_jobs.search", "{}")]))
    text = page(response)
    save = find(text, "form", id="save-case")
    assert save.attrs["action"] == "/policy/agents/main/suite/"
    case_round = json.loads(save.find("input", name="round").value)
    assert case_round["multi_action_mode"] == "off"
    response = web.post(
        "/policy/agents/main/suite/",
        {"op": "add", "name": "one search", "round": json.dumps(case_round)},
    )
    assert response.status_code == 302
    suite = find(page(web.get("/policy/agents/main/suite/")), "section", id="suite-cases")
    assert suite.find("h2").text == "1 case: all pass under the draft"


def test_it_names_the_missing_agent_on_the_404_page_and_in_the_api(web: Client) -> None:
    # One mapping (config.error_pages for pages, config.api for the API) of AgentNotFound.
    response = web.get("/policy/agents/nobody/effective/")
    assert response.status_code == 404
    assert "The draft has no agent 'nobody'." in text_of(response.content.decode(), "main")
    # An editing route (a prediction such as /effective falls back as the runtime does).
    response = web.get("/api/v1/agents/nobody/connections")
    assert (response.status_code, response.json()) == (
        404,
        {"error": "The draft has no agent 'nobody'."},
    )


# --- complete exec code (issue 37 §5) -------------------------------------------------------------

EXEC_POLICY = """\
surfaces:
  as_consumer:
    agents:
      main:
        tools:
          - kind: python
            module: exec_tools
            alias: exec_tools
            allowed: [execute_code_python]
            tool_traits: {execute_code_python: {strategy: [neutral]}}
"""
WRITE = '{"path": "%s", "channel": "canvas", "content": "x", "kind": "display"}'
EXEC = '{"contract": [{"name": "p", "filename": "a.md"}, {"name": "q", "filename": "b.md"}]}'


def _exec_round(web: Client, **fields: str) -> Any:
    draft_replace(data=load_policy(EXEC_POLICY).data, base_revision=draft_state().revision)
    actions = [
        ("react.write", WRITE % "a.md"),
        ("react.write", WRITE % "b.md"),
        ("exec_tools.execute_code_python", EXEC),
    ]
    fields = {"max_actions": "4", **fields}
    return web.post(PLAYGROUND, form(actions, multi_action_mode="on", react_version="v3", **fields))


def test_the_playground_marks_a_collision_that_depends_on_the_runtimes_set_order(
    web: Client,
) -> None:
    response = _exec_round(web)
    assert response.status_code == 200
    result = json.loads(pre(response, "result-json"))
    assert result["exec_code_complete"] is True
    assert result["order_dependent"] is True
    assert result["infos"][0]["files"] == ["a.md", "b.md"]
    assert "set order" in text_of(page(response), "p", id="order-dependent")
    assert "exec_code_complete" not in json.loads(pre(response, "round-json"))


def test_the_playground_takes_an_incomplete_code_channel(web: Client) -> None:
    response = _exec_round(web, exec_code_complete="false")
    result = json.loads(pre(response, "result-json"))
    assert result["exec_code_complete"] is False
    assert "order_dependent" not in result
    assert result["attempts"][0]["actions"][2]["code"] == "multi_action_bundle_unsafe_tool"
    assert json.loads(pre(response, "round-json"))["exec_code_complete"] is False
    chosen = find(page(response), "select", id="pg-code").find("option", value="false")
    assert "selected" in chosen.attrs
