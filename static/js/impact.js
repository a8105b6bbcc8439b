// The impact page, for windows larger than one step: replay the rounds a step at a time through
// POST /api/v1/policy/impact (its "before"/"next" cursors), show the progress, add up what each
// step found, and stop when asked (Cancel aborts the request in flight). Short windows, and
// browsers without this script, get the page the server renders.
(() => {
  "use strict";
  const form = document.getElementById("impact-form");
  if (!form) return;
  const labels = JSON.parse(document.getElementById("impact-labels").textContent);
  const panel = document.getElementById("impact-progress");
  const bar = document.getElementById("impact-bar");
  const status = document.getElementById("impact-status");
  const cancel = document.getElementById("impact-cancel");
  const results = document.getElementById("impact-steps");
  const SHOWN = 100;

  const csrf = () => (document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/) || [])[1] || "";
  const el = (tag, text, attrs = {}) => {
    const node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = text;
    for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
    return node;
  };

  const render = (state) => {
    results.replaceChildren();
    const n = state.affected.length;
    const head = n
      ? `This change alters ${n} of the last ${state.rounds} recorded round${state.rounds === 1 ? "" : "s"}`
      : `This change alters none of the last ${state.rounds} recorded round${state.rounds === 1 ? "" : "s"}`;
    results.append(el("p", head, { id: "impact-summary" }));
    const totals = el("ul", null, { class: "impact-totals" });
    for (const [kind, label] of Object.entries(labels)) {
      if (state.totals[kind]) {
        const item = el("li");
        item.append(el("strong", String(state.totals[kind])), ` ${label}`);
        totals.append(item);
      }
    }
    results.append(totals);
    if (!n) return;
    const table = el("table", null, { class: "table impact-rounds" });
    const body = el("tbody");
    for (const round of state.affected.slice(0, SHOWN)) {
      const row = el("tr");
      const name = `${round.agent} · ${round.turn_id} / ${round.iteration}`;
      const cell = el("td");
      cell.append(round.url ? el("a", name, { href: round.url }) : name);
      const changes = el("td");
      for (const change of round.changes) {
        const rule = change.rule ? ` (${change.rule})` : "";
        changes.append(el("div", `attempt ${change.attempt} #${change.action_index} ${change.tool_id || "—"}: ${labels[change.kind] || change.kind}${rule}`));
      }
      row.append(cell, changes);
      body.append(row);
    }
    table.append(body);
    const wrap = el("div", null, { class: "table-wrap" });
    wrap.append(table);
    results.append(wrap);
    if (n > SHOWN) results.append(el("p", `${SHOWN} of ${n} affected rounds shown; POST /api/v1/policy/impact lists them all.`, { class: "muted" }));
  };

  form.addEventListener("submit", async (event) => {
    const limit = Number(form.elements.limit.value);
    const step = Number(form.dataset.chunk);
    if (!(limit > step)) return;
    event.preventDefault();
    const controller = new AbortController();
    const state = { rounds: 0, read: 0, totals: {}, affected: [] };
    panel.hidden = false;
    cancel.hidden = false;
    cancel.disabled = false;
    bar.max = limit;
    bar.value = 0;
    status.textContent = `Replaying ${limit} rounds…`;
    document.getElementById("impact")?.remove();
    cancel.onclick = () => controller.abort();
    let before = null;
    try {
      while (state.read < limit) {
        const request = {
          candidate: form.elements.candidate.value,
          baseline: form.elements.baseline.value,
          limit: Math.min(step, limit - state.read),
        };
        for (const name of ["agent", "since", "until"]) {
          const value = form.elements[name]?.value.trim();
          if (value) request[name] = value;
        }
        if (before) request.before = before;
        const response = await fetch(form.dataset.api, {
          method: "POST",
          credentials: "same-origin",
          headers: { "Content-Type": "application/json", "X-CSRFToken": csrf() },
          body: JSON.stringify(request),
          signal: controller.signal,
        });
        const data = await response.json();
        if (!response.ok) {
          status.textContent = `Stopped: ${data.error || response.statusText}`;
          return;
        }
        state.read += data.read;
        state.rounds += data.rounds;
        for (const [kind, count] of Object.entries(data.totals)) {
          state.totals[kind] = (state.totals[kind] || 0) + count;
        }
        state.affected.push(...data.affected);
        bar.value = state.read;
        status.textContent = `Replayed ${state.read} of ${limit} rounds.`;
        render(state);
        if (!data.next || data.read === 0) break;
        before = data.next;
      }
      status.textContent = `Done: ${state.read} rounds read.`;
    } catch (error) {
      status.textContent = controller.signal.aborted
        ? `Cancelled after ${state.read} rounds: the figures below cover those.`
        : `Stopped: ${error}`;
    } finally {
      cancel.disabled = true;
    }
  });
})();
