// The round timeline: a mark reached with Tab (or hovered) shows the same details as its
// tooltip in the line under the chart, so keyboard users read what mouse users read.
(function () {
  "use strict";
  var start = function () {
    var chart = document.querySelector("svg.timeline");
    var out = document.getElementById("timeline-detail");
    if (!chart || !out) return;
    var show = function (event) {
      var mark = event.target.closest && event.target.closest(".mark");
      if (!mark) return;
      var label = mark.getAttribute("aria-label") || "";
      out.textContent = label;
      out.classList.add("active");
    };
    chart.addEventListener("focusin", show);
    chart.addEventListener("mouseover", show);
  };
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
