"""The draft as a download: one response for the API and the page, so their bytes agree."""

from __future__ import annotations

from django.http import HttpResponse

from policy.domain.descriptor_write import DescriptorExport, export_into_descriptor
from policy.selectors import draft_state
from policy.versions import version_data, version_get


def draft_export_response() -> HttpResponse:
    """The draft's export (byte-identical to ``traitdeck fmt``) as a YAML attachment."""
    state = draft_state()
    response = HttpResponse(state.text, content_type="application/yaml; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="traitdeck-policy.yaml"'
    response["X-Draft-Revision"] = str(state.revision)
    return response


class VersionMissing(LookupError):
    """No version of that number."""


def descriptor_export(
    descriptor: str | bytes, *, bundle: str | None = None, version: int | None = None
) -> DescriptorExport:
    """The draft (or version ``version``) written into a KDCube bundles descriptor, only the
    policy's lines changed. Raises ``DescriptorError``, ``ExportRefused`` or
    :class:`VersionMissing`."""
    if version is None:
        data = draft_state().data
    else:
        found = version_get(version)
        if found is None:
            raise VersionMissing(version)
        data = version_data(found)
    return export_into_descriptor(descriptor, data, bundle=bundle)


def descriptor_response(written: DescriptorExport) -> HttpResponse:
    """The descriptor with the policy written in, as a YAML attachment."""
    response = HttpResponse(written.text, content_type="application/yaml; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="bundles.yaml"'
    response["X-Bundle"] = written.bundle_id
    return response
