"""The import page (preview first, then apply), the export download, the overview's policy card."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from policy.cli import run as cli_run
from policy.domain.yaml_io import WEB_MAX_BYTES, export_text, load_policy
from policy.models import PolicyDraft
from policy.selectors import draft_state
from policy.services import draft_replace
from tests.markup import Element, assert_alert, find, find_all, first_element, is_fragment, text_of

pytestmark = pytest.mark.django_db

IMPORT = "/policy/import/"
EXPORT = "/policy/export.yaml"

POLICY = """\
surfaces:
  as_consumer:
    agents:
      main:
        tools:
          - {alias: jobs, ref: jobs.py, allowed: [search],
             tool_traits: {search: {strategy: [exploration]}}}
      helper:
        tools:
          - {kind: mcp, server_id: docs, allowed: [read],
             tool_traits: {read: {strategy: [exploration]}}}
"""
WITH_ERRORS = POLICY.replace("search: {strategy: [exploration]}", "search: {strategy: [bogus]}")
APPLY_BUTTON = "Apply: replace the draft"


def page(response: Any) -> str:
    return response.content.decode("utf-8")


def diff_text(response: Any) -> str:
    """The diff's lines as shown, folded runs included (not their "show N unchanged lines")."""
    diff = find(page(response), "div", class_="diff", id="import-diff")
    return "".join(pre.raw_text for pre in diff.find_all("pre"))


def carried(response: Any) -> tuple[str, str]:
    """The Apply form's hidden text and base_revision."""
    form = find(page(response), "form", class_="apply-form")
    return form.find("textarea", name="text").value, form.find("input", name="base_revision").value


def apply_buttons(text: str) -> list[Element]:
    """The button that applies the previewed text (none when nothing can be applied)."""
    return [button for button in find_all(text, "button") if button.text == APPLY_BUTTON]


@pytest.fixture
def web(admin_client: Client) -> Client:
    return admin_client


# --- the form ------------------------------------------------------------------------------------


def test_the_import_page_offers_paste_and_upload_and_says_comments_are_not_kept(
    web: Client,
) -> None:
    text = page(web.get(IMPORT))
    form = find(text, "form", class_="import-form")
    assert form.attrs["enctype"] == "multipart/form-data"
    assert form.find("textarea", id="import-text", name="text")
    assert form.find("input", type="file", name="file")
    [intro] = [p.text for p in find_all(text, "p") if p.text.startswith("Paste or upload")]
    assert "(at most 1 MiB)" in intro
    assert "Comments in hand-written files are not kept" in intro


def test_the_import_page_needs_a_login(client: Client) -> None:
    assert client.get(IMPORT).status_code == 302


# --- preview -------------------------------------------------------------------------------------


def test_preview_shows_diagnostics_and_a_diff_and_changes_nothing(web: Client) -> None:
    response = web.post(IMPORT, {"text": POLICY, "op": "preview"})
    assert response.status_code == 200
    text = page(response)
    assert find(text, "p", class_="summary").find("span", class_="chip ok").text == "0 errors"
    assert find_all(text, "li", data_code="timeout-missing")
    diff = diff_text(response)
    assert diff.startswith("--- draft (revision 0)\n+++ import\n")
    assert "-    agents: {}\n" in diff
    assert "+      main:\n" in diff
    [button] = apply_buttons(text)
    assert button.attrs["form"] == "apply-form"
    assert not PolicyDraft.objects.exists()


def test_the_apply_form_carries_the_previewed_text_and_revision(web: Client) -> None:
    response = web.post(IMPORT, {"text": POLICY, "op": "preview"})
    assert carried(response) == (POLICY, "0")


def test_an_htmx_preview_answers_with_the_preview_box_only(web: Client) -> None:
    response = web.post(IMPORT, {"text": POLICY, "op": "preview"}, HTTP_HX_REQUEST="true")
    text = page(response)
    assert is_fragment(text)
    assert first_element(text).matches("div", {"id": "preview"})
    assert apply_buttons(text)


def test_an_uploaded_file_is_previewed(web: Client) -> None:
    upload = SimpleUploadedFile("policy.yaml", POLICY.encode(), content_type="application/yaml")
    response = web.post(IMPORT, {"text": "", "file": upload, "op": "preview"})
    assert response.status_code == 200
    assert "+      helper:\n" in diff_text(response)
    assert carried(response)[0] == POLICY


def test_pasted_crlf_line_breaks_preview_like_the_file(web: Client) -> None:
    response = web.post(IMPORT, {"text": POLICY.replace("\n", "\r\n"), "op": "preview"})
    assert response.status_code == 200
    assert carried(response)[0] == POLICY


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("surfaces: [\n", "yaml-syntax"),
        ("surfaces:\n  as_consumer: {agents: {}}\nsurfaces: {}\n", "duplicate-key"),
        ("surfaces:\n  as_consumer: {}\n", "shape"),
        ("just text\n", "shape"),
    ],
    ids=["yaml-syntax", "duplicate-key", "no-agents", "not-a-mapping"],
)
def test_refused_text_shows_its_diagnostics_and_no_apply_button(
    text: str, code: str, web: Client
) -> None:
    response = web.post(IMPORT, {"text": text, "op": "preview"})
    assert response.status_code == 422
    body = page(response)
    assert find(body, "section", class_="import-preview").find("h2").text == (
        "This text cannot be imported"
    )
    assert find_all(body, "li", data_code=code)
    assert not apply_buttons(body)
    assert not PolicyDraft.objects.exists()


def test_a_yaml_syntax_error_names_its_line_and_column(web: Client) -> None:
    response = web.post(
        IMPORT, {"text": "surfaces:\n  as_consumer: {agents: [}\n", "op": "preview"}
    )
    [syntax] = find_all(page(response), "li", data_code="yaml-syntax")
    assert "line 2:26" in syntax.text


def test_text_with_errors_can_still_be_applied_and_says_errors_block_publishing(
    web: Client,
) -> None:
    response = web.post(IMPORT, {"text": WITH_ERRORS, "op": "preview"})
    assert response.status_code == 200
    text = page(response)
    summary = find(text, "p", class_="summary")
    assert summary.find("span", class_="chip bad").text == "1 error"
    assert "block publishing" in summary.text
    assert apply_buttons(text)


def test_previewing_the_current_draft_says_nothing_changes(web: Client) -> None:
    draft_replace(data=load_policy(POLICY).data, base_revision=None)
    response = web.post(IMPORT, {"text": draft_state().text, "op": "preview"})
    assert text_of(page(response), "p", class_="unchanged") == (
        "No changes: the imported policy is the same as the draft."
    )
    assert not apply_buttons(page(response))


def test_an_empty_form_asks_for_text(web: Client) -> None:
    response = web.post(IMPORT, {"text": "  \n", "op": "preview"})
    assert response.status_code == 422
    assert_alert(page(response), "Paste the policy YAML or choose a file")


# --- too large -----------------------------------------------------------------------------------


def over_the_limit() -> str:
    return POLICY + "# " + "x" * (WEB_MAX_BYTES - len(POLICY)) + "\n"


def test_pasted_text_over_one_mib_is_too_large(web: Client) -> None:
    response = web.post(IMPORT, {"text": over_the_limit(), "op": "preview"})
    assert response.status_code == 413
    assert_alert(page(response), "The text is too large")
    assert not apply_buttons(page(response))


def test_an_uploaded_file_over_one_mib_is_too_large(web: Client) -> None:
    upload = SimpleUploadedFile("big.yaml", over_the_limit().encode())
    response = web.post(IMPORT, {"file": upload, "op": "preview"})
    assert response.status_code == 413
    assert_alert(page(response), "The text is too large")


def test_a_form_body_over_djangos_read_limit_is_too_large_in_the_view(web: Client) -> None:
    # (With CSRF enforced, Django's CSRF middleware reads the form first and answers 400 for a
    # body over DATA_UPLOAD_MAX_MEMORY_SIZE; the page's script stops such a paste before sending.)
    response = web.post(IMPORT, {"text": "x" * (3 * WEB_MAX_BYTES), "op": "preview"})
    assert response.status_code == 413
    assert_alert(page(response), "The text is too large")


def test_the_page_warns_before_sending_a_paste_over_the_limit(web: Client) -> None:
    text = page(web.get(IMPORT))
    # The check runs from static/js/import-size.js (the CSP allows no inline script).
    assert find(text, "textarea", id="import-text").attrs["data-max-bytes"] == str(WEB_MAX_BYTES)
    scripts = [element.attrs.get("src", "") for element in find_all(text, "script")]
    assert [src for src in scripts if "js/import-size." in src]
    script = (Path(__file__).resolve().parents[2] / "static/js/import-size.js").read_text()
    assert "setCustomValidity" in script


def test_one_mib_exactly_is_accepted(web: Client) -> None:
    text = POLICY + "# " + "x" * (WEB_MAX_BYTES - len(POLICY) - 3) + "\n"
    assert len(text.encode()) == WEB_MAX_BYTES
    assert web.post(IMPORT, {"text": text, "op": "preview"}).status_code == 200


def test_an_alias_bomb_is_too_large(web: Client) -> None:
    bomb = (
        "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
        + "".join(
            f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n"
            for p, c in zip("abcde", "bcdef", strict=True)
        )
        + "surfaces: {as_consumer: {agents: {}}}\n"
    )
    response = web.post(IMPORT, {"text": bomb, "op": "preview"})
    assert response.status_code == 413
    assert find_all(page(response), "li", data_code="yaml-too-large")


# --- apply ---------------------------------------------------------------------------------------


def test_apply_replaces_the_draft_and_lands_on_the_agents_page(web: Client) -> None:
    text, revision = carried(web.post(IMPORT, {"text": POLICY, "op": "preview"}))
    response = web.post(IMPORT, {"text": text, "base_revision": revision, "op": "apply"})
    assert response.status_code == 302
    assert response["Location"] == "/policy/"
    state = draft_state()
    assert state.revision == 1
    assert state.agents == ["main", "helper"]
    assert state.text == export_text(load_policy(POLICY).data)


def test_apply_says_what_happened(web: Client) -> None:
    response = web.post(IMPORT, {"text": POLICY, "base_revision": "0", "op": "apply"}, follow=True)
    assert_alert(page(response), "Imported: the draft is now at revision 1 with 2 agents.")


def test_apply_on_a_stale_revision_is_409_with_the_message_and_changes_nothing(
    web: Client,
) -> None:
    text, revision = carried(web.post(IMPORT, {"text": POLICY, "op": "preview"}))
    draft_replace(data=load_policy(WITH_ERRORS).data, base_revision=None)  # someone else
    before = draft_state()
    response = web.post(IMPORT, {"text": text, "base_revision": revision, "op": "apply"})
    assert response.status_code == 409
    body = page(response)
    assert_alert(body, "The draft changed since you loaded it")
    assert text_of(body, "p", class_="conflict-note").startswith("Nothing was applied.")
    assert draft_state() == before
    # The new preview is against the current draft, ready to apply again.
    assert carried(response) == (POLICY, "1")


@pytest.mark.parametrize("revision", [None, "", "one", "\u00b2"])
def test_apply_without_a_usable_base_revision_is_refused(revision: str | None, web: Client) -> None:
    data = {"text": POLICY, "op": "apply"}
    if revision is not None:
        data["base_revision"] = revision
    response = web.post(IMPORT, data)
    assert response.status_code == 422
    assert not PolicyDraft.objects.exists()


def test_apply_of_refused_text_changes_nothing(web: Client) -> None:
    response = web.post(IMPORT, {"text": "surfaces: [\n", "base_revision": "0", "op": "apply"})
    assert response.status_code == 422
    assert not PolicyDraft.objects.exists()


# --- export --------------------------------------------------------------------------------------


def test_export_downloads_the_draft_yaml_as_an_attachment(web: Client) -> None:
    draft_replace(data=load_policy(POLICY).data, base_revision=None)
    response = web.get(EXPORT)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/yaml; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="traitdeck-policy.yaml"'
    assert response.content == web.get("/api/v1/policy/export.yaml").content


def test_export_is_byte_identical_to_traitdeck_fmt(web: Client, tmp_path: Path) -> None:
    draft_replace(data=load_policy(POLICY).data, base_revision=None)
    source = tmp_path / "p.yaml"
    source.write_text(POLICY, encoding="utf-8")
    out = io.StringIO()
    assert cli_run(["fmt", str(source)], out, io.StringIO()) == 0
    assert web.get(EXPORT).content == out.getvalue().encode("utf-8")


def test_a_fresh_instance_exports_the_empty_policy(web: Client) -> None:
    content = web.get(EXPORT).content.decode()
    assert content.startswith("# traitdeck-format: 1\n# sha256: ")  # raw: the YAML export
    assert content.endswith("\nsurfaces:\n  as_consumer:\n    agents: {}\n")  # raw: (the same)


def test_export_needs_a_login(client: Client) -> None:
    assert client.get(EXPORT).status_code == 302


# --- overview ------------------------------------------------------------------------------------


def test_the_overview_invites_an_import_on_an_empty_draft(web: Client) -> None:
    text = page(web.get("/"))
    invitation = find(text, "p", class_="empty-policy")
    assert invitation.text == "No policy yet — import one or create an agent."
    assert invitation.find("a", href="/policy/import/").text == "import one"
    assert invitation.find("a", href="/policy/").text == "create an agent"


def test_the_overview_counts_agents_revision_and_problems(web: Client) -> None:
    draft_replace(data=load_policy(WITH_ERRORS).data, base_revision=None)
    text = page(web.get("/"))
    assert not find_all(text, "p", class_="empty-policy")
    assert text_of(text, "strong", class_="agent-count") == "2 agents"
    assert text_of(text, "strong", class_="draft-revision") == "1"
    assert text_of(text, class_="error-count") == "1 error"
    warnings = text_of(text, class_="warning-count").split()
    assert warnings[0].isdigit()
    assert warnings[1] in ("warning", "warnings")
