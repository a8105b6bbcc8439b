// The live rounds page. htmx's websocket extension appends streamed cards to #incoming and
// replaces #counters and #live-seq; this script moves each card into #rounds (or holds it while
// paused), keeps the reading position, and reloads the list when it missed a message.
(() => {
  "use strict";

  function setUp() {
    const live = document.getElementById("live");
    const rounds = document.getElementById("rounds");
    const incoming = document.getElementById("incoming");
    if (!live || !rounds || !incoming) return;
    const status = document.getElementById("stream-status");
    const pauseButton = document.getElementById("pause");
    const pendingCount = document.getElementById("pending-count");
    const maxCards = Number(live.dataset.maxCards) || 200;

    let paused = false;
    let connected = false;
    let resyncing = false;
    let resyncWanted = false;
    let lastSeq = 0;
    // Highest round version this page holds: a reconnect asks only for what came after it.
    let maxVersion = Number(live.dataset.since) || 0;
    // Cards held while paused or while the list reloads: round id -> newest card, oldest first.
    const held = new Map();

    const isCard = (node) => node.nodeType === Node.ELEMENT_NODE && node.classList.contains("round-card");
    const shown = (id) => rounds.querySelector("#" + CSS.escape(id));

    function noteVersion(card) {
      const version = Number(card.dataset.version);
      if (version > maxVersion) maxVersion = version;
    }

    function setStatus(text, state) {
      if (!status) return;
      status.textContent = text;
      status.className = "stream-status " + state;
    }

    // Keyboard focus inside the list: a card placed above the focused one would move it (and
    // a replaced card would drop focus to <body>), so new cards wait until focus leaves.
    const focusInList = () => rounds.contains(document.activeElement);
    const holding = () => paused || resyncing || focusInList();

    function showPending() {
      if (!pendingCount) return;
      let fresh = 0;
      for (const id of held.keys()) if (!shown(id)) fresh += 1;
      const noun = fresh === 1 ? " new round" : " new rounds";
      pendingCount.textContent = paused ? fresh + noun + " held while paused"
        : fresh + noun + " held while the focus is in the list";
      pendingCount.hidden = !(paused || (focusInList() && held.size));
    }

    function showState() {
      if (paused) setStatus("paused", "paused");
      else if (connected) setStatus("live", "live");
    }

    // Run a change to the list without moving what the reader looks at: when the top of the
    // list is scrolled out of view, the first visible card stays where it is on screen.
    function keepingScroll(change) {
      if (rounds.getBoundingClientRect().top >= 0) {
        change();
        return;
      }
      let anchorId = null;
      let anchorTop = 0;
      for (const card of rounds.children) {
        const box = card.getBoundingClientRect();
        if (box.bottom > 0) {
          anchorId = card.id;
          anchorTop = box.top;
          break;
        }
      }
      change();
      const anchor = anchorId && shown(anchorId);
      if (anchor) window.scrollBy(0, anchor.getBoundingClientRect().top - anchorTop);
    }

    function place(cards) {
      if (!cards.length) return;
      keepingScroll(() => {
        for (const card of cards) {
          const existing = shown(card.id);
          if (existing) existing.replaceWith(card);
          else rounds.prepend(card);
        }
        while (rounds.children.length > maxCards) rounds.lastElementChild.remove();
      });
    }

    function hold(cards) {
      for (const card of cards) {
        held.delete(card.id); // re-insert: the map stays in order of the latest change
        held.set(card.id, card);
      }
      showPending();
    }

    function release() {
      const cards = [...held.values()];
      held.clear();
      place(cards);
      showPending();
    }

    // Cards arrive in #incoming (one message may hold many): take them out at once.
    function drain() {
      const cards = [...incoming.childNodes].filter(isCard);
      if (!incoming.firstChild) return;
      incoming.replaceChildren();
      cards.forEach(noteVersion);
      if (holding()) hold(cards);
      else place(cards);
    }
    rounds.addEventListener("focusout", (event) => {
      if (rounds.contains(event.relatedTarget)) return; // still inside the list
      if (!paused && !resyncing) release();
    });
    new MutationObserver(drain).observe(incoming, { childList: true });

    // Reload the whole list (after a missed message, or when the server says the page is too
    // far behind). Cards arriving meanwhile are newer than the reloaded list: held, then placed.
    async function resync() {
      if (paused || resyncing) {
        resyncWanted = true;
        return;
      }
      resyncWanted = false;
      resyncing = true;
      try {
        const response = await fetch(live.dataset.listUrl, {
          headers: { "HX-Request": "true" },
          credentials: "same-origin",
        });
        if (response.ok) {
          const template = document.createElement("template");
          template.innerHTML = await response.text();
          const cards = [...template.content.children].filter(isCard);
          cards.forEach(noteVersion);
          keepingScroll(() => rounds.replaceChildren(...cards));
        }
      } catch (error) {
        console.warn("live: could not reload the list", error);
      } finally {
        resyncing = false;
        if (!paused && !focusInList()) release();
        if (resyncWanted) resync();
      }
    }

    // Ask a (re)connection only for what this page does not hold yet.
    function rememberVersion(event) {
      const connection = event.detail && event.detail.connection;
      if (!connection || !connection.url) return;
      const url = new URL(connection.url);
      url.searchParams.set("since", String(maxVersion));
      connection.url = url.toString();
    }

    live.addEventListener("htmx:ws:before:connection", rememberVersion);
    live.addEventListener("htmx:ws:after:connection", () => {
      lastSeq = 0; // every connection numbers its messages from 1
      connected = true;
      showState();
    });
    live.addEventListener("htmx:ws:close", (event) => {
      const detail = event.detail || {};
      const retried = detail.connection && detail.connection.config
        ? detail.connection.config.reconnectCodes : null;
      if (detail.reason === "removed") return;
      connected = false;
      if (detail.code === 4401 || detail.code === 4403 || detail.code === 4429) {
        // The server ended the stream on purpose (session over, role gone, too many live pages
        // open): say why, and stop.
        const status = { 4401: "signed out — log in again", 4403: "no longer allowed",
          4429: "too many live pages open" };
        setStatus(status[detail.code], "closed");
        const ended = document.getElementById("stream-ended");
        if (ended) {
          ended.querySelector(".why").textContent = ended.dataset[String(detail.code)] || "";
          const login = ended.querySelector(".login-link");
          if (login) login.hidden = detail.code === 4429;
          ended.hidden = false;
        }
      } else if (retried && !retried.includes(detail.code)) setStatus("disconnected — reload the page", "closed");
      else setStatus("reconnecting…", "reconnecting");
    });
    live.addEventListener("htmx:ws:error", () => setStatus("reconnecting…", "reconnecting"));
    live.addEventListener("htmx:ws:after:message:incoming", (event) => {
      rememberVersion(event);
      const marker = document.getElementById("live-seq");
      const seq = marker ? Number(marker.dataset.seq) : NaN;
      if (!Number.isInteger(seq) || seq < 1) return;
      const gap = seq !== lastSeq + 1;
      lastSeq = seq;
      if (gap || marker.dataset.resync === "true") resync();
    });

    if (pauseButton) {
      pauseButton.addEventListener("click", () => {
        paused = !paused;
        pauseButton.textContent = paused ? "Resume" : "Pause";
        pauseButton.setAttribute("aria-pressed", String(paused));
        if (!paused) {
          if (resyncWanted) {
            held.clear(); // the reloaded list holds them
            resync();
          } else {
            release();
          }
        }
        showState();
        showPending();
      });
    }
  }

  // Compact cards: one line per round, chips only; a click on a card (or its toggle) expands
  // it. The choice is kept in this browser (localStorage) and applied before the first paint
  // of the list, so a reload keeps it.
  const COMPACT_KEY = "traitdeck.live.compact";

  function setUpCompact() {
    const rounds = document.getElementById("rounds");
    const button = document.getElementById("compact");
    if (!rounds || !button) return;
    const apply = (on) => {
      rounds.classList.toggle("compact", on);
      button.setAttribute("aria-pressed", String(on));
    };
    let stored = null;
    try { stored = window.localStorage.getItem(COMPACT_KEY); } catch (e) { stored = null; }
    apply(stored === "1");
    button.addEventListener("click", () => {
      const on = !rounds.classList.contains("compact");
      apply(on);
      try { window.localStorage.setItem(COMPACT_KEY, on ? "1" : "0"); } catch (e) { /* private mode */ }
    });
    rounds.addEventListener("click", (event) => {
      if (!rounds.classList.contains("compact")) return;
      const card = event.target.closest(".round-card");
      if (!card || (event.target.closest("a") && !event.target.closest(".card-toggle"))) return;
      const open = card.classList.toggle("expanded");
      const toggle = card.querySelector(".card-toggle");
      if (toggle) toggle.setAttribute("aria-expanded", String(open));
    });
  }

  function start() {
    setUpCompact();
    setUp();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
