"""The import page (preview first, then apply), the export download, the overview's policy card."""

from __future__ import annotations

import html
import io
import re
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
    match = re.search(
        r'<div class="diff" id="import-diff"[^>]*>(.*?)</div>', page(response), re.DOTALL
    )
    assert match, "no diff shown"
    shown = re.sub(r"<summary>.*?</summary>", "", match[1])  # "show N unchanged lines"
    return html.unescape(re.sub(r"<[^>]+>", "", shown))


def carried(response: Any) -> tuple[str, str]:
    """The Apply form's hidden text and base_revision."""
    text = page(response)
    form = text[text.index('class="apply-form"') :]
    revision = re.search(r'name="base_revision" value="(\d+)"', form)
    body = re.search(r'<textarea name="text" hidden>\n(.*?)</textarea>', form, re.DOTALL)
    assert revision, form
    assert body, form
    return html.unescape(body[1]), revision[1]


@pytest.fixture
def web(admin_client: Client) -> Client:
    return admin_client


# --- the form ------------------------------------------------------------------------------------


def test_the_import_page_offers_paste_and_upload_and_says_comments_are_not_kept(
    web: Client,
) -> None:
    text = page(web.get(IMPORT))
    assert '<textarea id="import-text" name="text"' in text
    assert 'type="file" name="file"' in text
    assert 'enctype="multipart/form-data"' in text
    assert "Comments in hand-written files are not kept" in text
    assert "1 MiB" in text


def test_the_import_page_needs_a_login(client: Client) -> None:
    assert client.get(IMPORT).status_code == 302


# --- preview -------------------------------------------------------------------------------------


def test_preview_shows_diagnostics_and_a_diff_and_changes_nothing(web: Client) -> None:
    response = web.post(IMPORT, {"text": POLICY, "op": "preview"})
    assert response.status_code == 200
    text = page(response)
    assert "0 errors" in text
    assert 'data-code="timeout-missing"' in text
    diff = diff_text(response)
    assert diff.startswith("--- draft (revision 0)\n+++ import\n")
    assert "-    agents: {}\n" in diff
    assert "+      main:\n" in diff
    assert APPLY_BUTTON in text
    assert not PolicyDraft.objects.exists()


def test_the_apply_form_carries_the_previewed_text_and_revision(web: Client) -> None:
    response = web.post(IMPORT, {"text": POLICY, "op": "preview"})
    assert carried(response) == (POLICY, "0")


def test_an_htmx_preview_answers_with_the_preview_box_only(web: Client) -> None:
    response = web.post(IMPORT, {"text": POLICY, "op": "preview"}, HTTP_HX_REQUEST="true")
    text = page(response)
    assert "<html" not in text
    assert text.lstrip().startswith('<div id="preview">')
    assert APPLY_BUTTON in text


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
    assert "This text cannot be imported" in body
    assert f'data-code="{code}"' in body
    assert APPLY_BUTTON not in body
    assert not PolicyDraft.objects.exists()


def test_a_yaml_syntax_error_names_its_line_and_column(web: Client) -> None:
    response = web.post(
        IMPORT, {"text": "surfaces:\n  as_consumer: {agents: [}\n", "op": "preview"}
    )
    assert "line 2:26" in page(response)


def test_text_with_errors_can_still_be_applied_and_says_errors_block_publishing(
    web: Client,
) -> None:
    response = web.post(IMPORT, {"text": WITH_ERRORS, "op": "preview"})
    assert response.status_code == 200
    text = page(response)
    assert "1 error" in text
    assert "block publishing" in text
    assert APPLY_BUTTON in text


def test_previewing_the_current_draft_says_nothing_changes(web: Client) -> None:
    draft_replace(data=load_policy(POLICY).data, base_revision=None)
    response = web.post(IMPORT, {"text": draft_state().text, "op": "preview"})
    assert "No changes: the imported policy is the same as the draft." in page(response)
    assert APPLY_BUTTON not in page(response)


def test_an_empty_form_asks_for_text(web: Client) -> None:
    response = web.post(IMPORT, {"text": "  \n", "op": "preview"})
    assert response.status_code == 422
    assert "Paste the policy YAML or choose a file" in page(response)


# --- too large -----------------------------------------------------------------------------------


def over_the_limit() -> str:
    return POLICY + "# " + "x" * (WEB_MAX_BYTES - len(POLICY)) + "\n"


def test_pasted_text_over_one_mib_is_too_large(web: Client) -> None:
    response = web.post(IMPORT, {"text": over_the_limit(), "op": "preview"})
    assert response.status_code == 413
    assert "The text is too large" in page(response)
    assert APPLY_BUTTON not in page(response)


def test_an_uploaded_file_over_one_mib_is_too_large(web: Client) -> None:
    upload = SimpleUploadedFile("big.yaml", over_the_limit().encode())
    response = web.post(IMPORT, {"file": upload, "op": "preview"})
    assert response.status_code == 413
    assert "The text is too large" in page(response)


def test_a_form_body_over_djangos_read_limit_is_too_large_in_the_view(web: Client) -> None:
    # (With CSRF enforced, Django's CSRF middleware reads the form first and answers 400 for a
    # body over DATA_UPLOAD_MAX_MEMORY_SIZE; the page's script stops such a paste before sending.)
    response = web.post(IMPORT, {"text": "x" * (3 * WEB_MAX_BYTES), "op": "preview"})
    assert response.status_code == 413
    assert "The text is too large" in page(response)


def test_the_page_warns_before_sending_a_paste_over_the_limit(web: Client) -> None:
    text = page(web.get(IMPORT))
    # The check runs from static/js/import-size.js (the CSP allows no inline script).
    assert f'data-max-bytes="{WEB_MAX_BYTES}"' in text
    assert "js/import-size.js" in text
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
    assert 'data-code="yaml-too-large"' in page(response)


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
    assert "Imported: the draft is now at revision 1 with 2 agents." in page(response)


def test_apply_on_a_stale_revision_is_409_with_the_message_and_changes_nothing(
    web: Client,
) -> None:
    text, revision = carried(web.post(IMPORT, {"text": POLICY, "op": "preview"}))
    draft_replace(data=load_policy(WITH_ERRORS).data, base_revision=None)  # someone else
    before = draft_state()
    response = web.post(IMPORT, {"text": text, "base_revision": revision, "op": "apply"})
    assert response.status_code == 409
    body = page(response)
    assert "The draft changed since you loaded it" in body
    assert "Nothing was applied" in body
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
    assert content.startswith("# traitdeck-format: 1\n# sha256: ")
    assert content.endswith("\nsurfaces:\n  as_consumer:\n    agents: {}\n")


def test_export_needs_a_login(client: Client) -> None:
    assert client.get(EXPORT).status_code == 302


# --- overview ------------------------------------------------------------------------------------


def test_the_overview_invites_an_import_on_an_empty_draft(web: Client) -> None:
    text = page(web.get("/"))
    assert "No policy yet — " in text
    assert 'href="/policy/import/">import one</a>' in text
    assert 'href="/policy/">create an agent</a>' in text


def test_the_overview_counts_agents_revision_and_problems(web: Client) -> None:
    draft_replace(data=load_policy(WITH_ERRORS).data, base_revision=None)
    text = page(web.get("/"))
    assert "No policy yet" not in text
    assert '<strong class="agent-count">2 agents</strong>' in text
    assert '<strong class="draft-revision">1</strong>' in text
    assert re.search(r'error-count">1 error<', text)
    assert re.search(r'warning-count">\d+ warnings?<', text)
