// Copy buttons: <button data-copy="#selector"> copies that element's text to the clipboard and
// says so in the nearest [data-copy-status]. Without a clipboard (http, old browser) it selects
// the text instead, so the person can press Ctrl+C.
(() => {
  "use strict";
  document.addEventListener("click", async (event) => {
    const button = event.target.closest("button[data-copy]");
    if (!button) return;
    const source = document.querySelector(button.dataset.copy);
    if (!source) return;
    const status = button.parentElement.querySelector("[data-copy-status]");
    try {
      await navigator.clipboard.writeText(source.textContent.trim());
      if (status) status.textContent = "Copied.";
    } catch {
      const range = document.createRange();
      range.selectNodeContents(source);
      const selection = window.getSelection();
      selection.removeAllRanges();
      selection.addRange(range);
      if (status) status.textContent = "Selected: press Ctrl+C (⌘C) to copy.";
    }
  });
})();
