// The policy import form. Django reads at most 2 MiB of form text, so a huge paste would only get
// "Bad Request": say "too large" before sending instead. (Uploads and 1–2 MiB pastes are checked
// on the server.) The limit comes from the textarea's data-max-bytes. Listens on the document, so
// a form that htmx swapped in later is covered too.
(() => {
  "use strict";
  document.addEventListener("input", (event) => {
    const area = event.target;
    if (!(area instanceof HTMLTextAreaElement) || area.id !== "import-text") return;
    const note = document.getElementById("import-size");
    const limit = Number(area.dataset.maxBytes);
    if (!limit) return;
    const size = new TextEncoder().encode(area.value.replace(/\r\n/g, "\n")).length;
    const message =
      size > limit
        ? "The text is too large: " + size + " bytes, the web import takes at most " + limit + " bytes (1 MiB)."
        : "";
    area.setCustomValidity(message);
    if (note) note.textContent = message;
  });
})();
