// Times as the reader lives them: every <time class="when"> is shown in the browser's zone with
// the zone named ("14:03:07 CET"); the UTC time stays in its tooltip. Cards the live stream
// inserts later are converted as they arrive.
(function () {
  "use strict";
  var zoneName = function (date) {
    try {
      var part = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" })
        .formatToParts(date).find(function (p) { return p.type === "timeZoneName"; });
      return part ? part.value : "";
    } catch (e) { return ""; }
  };
  var pad = function (n, w) { return String(n).padStart(w || 2, "0"); };
  var show = function (el) {
    if (el.dataset.localized === el.getAttribute("datetime")) return;
    var date = new Date(el.getAttribute("datetime"));
    if (isNaN(date.getTime())) return;
    var style = el.dataset.style || "datetime";
    var clock = pad(date.getHours()) + ":" + pad(date.getMinutes()) + ":" + pad(date.getSeconds());
    if (style === "precise") clock += "." + pad(date.getMilliseconds(), 3);
    var day = date.getFullYear() + "-" + pad(date.getMonth() + 1) + "-" + pad(date.getDate());
    var text = (style === "time" ? clock : day + " " + clock) + " " + zoneName(date);
    el.textContent = text.trim();
    el.title = date.toISOString().replace("T", " ").replace(/\.\d+Z$/, " UTC");
    el.dataset.localized = el.getAttribute("datetime");
  };
  var all = function (root) {
    if (root.matches && root.matches("time.when")) show(root);
    if (root.querySelectorAll) root.querySelectorAll("time.when").forEach(show);
  };
  var start = function () {
    all(document);
    new MutationObserver(function (changes) {
      changes.forEach(function (change) { change.addedNodes.forEach(all); });
    }).observe(document.body, { childList: true, subtree: true });
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
