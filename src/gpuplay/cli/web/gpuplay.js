// gpuplay serve's page: drives textual-serve's terminal (window.TextualTerminal, exposed by the
// server's copy of textual.js) with what a talk on a stage needs:
//  - keys and a presenter clicker work before any click: the terminal takes the focus on load,
//    when the tab becomes visible and when the websocket opens; a key that lands on the page
//    instead (PageDown, PageUp, Home, End, arrows, b, ., ...) is forwarded to the app;
//  - ctrl + / ctrl - / ctrl 0 (and + / - in talk mode) scale the terminal's font, remembered per
//    browser (localStorage), and the terminal refits;
//  - after a server restart the page reconnects by itself (backoff), and with the server's
//    --resume the talk goes on at the step this tab was on (a new tab starts at the first);
//  - an error in the session, an idle timeout or a full server shows as a notice, not a splash.
(function () {
  "use strict";

  const FONT_MIN = 8;
  const FONT_MAX = 64;
  const BACKOFF_MS = [500, 1000, 2000, 4000, 8000, 10000];
  // Close codes the server uses on purpose: no automatic reconnect after these.
  const FINAL_CLOSE = new Set([1000, 4000, 4001, 4002, 4003]);
  const KEY_SEQUENCES = {
    PageDown: "\x1b[6~",
    PageUp: "\x1b[5~",
    Home: "\x1b[H",
    End: "\x1b[F",
    ArrowUp: "\x1b[A",
    ArrowDown: "\x1b[B",
    ArrowRight: "\x1b[C",
    ArrowLeft: "\x1b[D",
    Enter: "\r",
    Escape: "\x1b",
    Tab: "\t",
    Backspace: "\x7f",
  };

  let term = null;
  let attempt = 0;
  let retryTimer = null;
  let talk = false;
  let fontKey = "gpuplay.fontSize";

  function $(id) {
    return document.getElementById(id);
  }

  function stripTokenFromAddressBar() {
    // The token came once in the URL; the cookie carries on. Keep it out of history and screenshots.
    const url = new URL(window.location.href);
    if (url.searchParams.has("token")) {
      url.searchParams.delete("token");
      const query = url.searchParams.toString();
      window.history.replaceState(null, "", url.pathname + (query ? "?" + query : "") + url.hash);
    }
  }

  // A talk's position belongs to the tab that presents it: an id kept in this tab's
  // sessionStorage (it outlives a reload and a reconnect, a new tab or browser gets its own) is
  // the websocket's path, and the server hands it to that tab's presenter. Another speaker's
  // earlier session, or another tab, never decides where this one starts.
  function talkId() {
    try {
      let id = window.sessionStorage.getItem("gpuplay.talk") || "";
      if (!/^[0-9a-f]{32}$/.test(id)) {
        const bytes = new Uint8Array(16);
        window.crypto.getRandomValues(bytes);
        id = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
        window.sessionStorage.setItem("gpuplay.talk", id);
      }
      return id;
    } catch (e) {
      return ""; /* storage disabled: the talk starts at its first step */
    }
  }

  function websocketUrl() {
    const id = talk ? talkId() : "";
    const base = (window.location.protocol === "https:" ? "wss:" : "ws:") + "//" + window.location.host + "/ws";
    return id ? base + "/" + id : base;
  }

  function storedFontSize(fallback) {
    try {
      const v = parseInt(window.localStorage.getItem(fontKey) || "", 10);
      if (v >= FONT_MIN && v <= FONT_MAX) return v;
    } catch (e) {
      /* storage disabled: the default size */
    }
    return fallback;
  }

  function setFontSize(size) {
    if (!term) return;
    const n = Math.max(FONT_MIN, Math.min(FONT_MAX, Math.round(size)));
    term.terminal.options.fontSize = n;
    try {
      window.localStorage.setItem(fontKey, String(n));
    } catch (e) {
      /* not remembered, still applied */
    }
    term.fit();
    showBanner("font " + n + " px", 1200);
  }

  function fontSize() {
    return term ? Number(term.terminal.options.fontSize) : 16;
  }

  function textarea() {
    return document.querySelector("#terminal .xterm-helper-textarea");
  }

  function focusTerminal() {
    const ta = textarea();
    if (ta && document.activeElement !== ta && $("notice").hidden) {
      ta.focus({ preventScroll: true });
    }
  }

  function send(data) {
    if (term && term.socket && term.socket.readyState === WebSocket.OPEN) {
      term.socket.send(JSON.stringify(["stdin", data]));
    }
  }

  let bannerTimer = null;
  function showBanner(text, ms) {
    const b = $("banner");
    b.textContent = text;
    b.hidden = false;
    clearTimeout(bannerTimer);
    if (ms) bannerTimer = setTimeout(() => (b.hidden = true), ms);
  }

  function hideBanner() {
    clearTimeout(bannerTimer);
    $("banner").hidden = true;
  }

  function showNotice(title, detail, canRestart) {
    $("notice-title").textContent = title;
    $("notice-detail").textContent = detail || "";
    $("notice-detail").hidden = !detail;
    const button = $("notice-button");
    button.hidden = !canRestart;
    $("notice").hidden = false;
    hideBanner();
    if (canRestart) button.focus();
  }

  function hideNotice() {
    $("notice").hidden = true;
  }

  function scheduleReconnect(why) {
    clearTimeout(retryTimer);
    const delay = BACKOFF_MS[Math.min(attempt, BACKOFF_MS.length - 1)];
    attempt += 1;
    showBanner(why + ": reconnecting in " + (delay / 1000).toFixed(1) + " s (attempt " + attempt + ")");
    retryTimer = setTimeout(probeAndConnect, delay);
  }

  async function probeAndConnect() {
    // Ask before opening a websocket: a refused websocket says nothing about why.
    let status = 0;
    try {
      const r = await fetch("/alive", { cache: "no-store", credentials: "same-origin" });
      status = r.status;
    } catch (e) {
      scheduleReconnect("server unreachable");
      return;
    }
    if (status === 403) {
      showNotice(
        "Not signed in to this gpuplay server",
        "It was restarted with another token, or the sign-in expired.\n" +
          "Open the URL with ?token=… that `gpuplay serve` printed.",
        false
      );
      return;
    }
    if (status === 503) {
      scheduleReconnect("every session is in use");
      return;
    }
    if (status < 200 || status >= 300) {
      scheduleReconnect("server answered " + status);
      return;
    }
    connect();
  }

  function onMessage(ev) {
    if (typeof ev.data !== "string") {
      return;
    }
    let msg;
    try {
      msg = JSON.parse(ev.data);
    } catch (e) {
      return;
    }
    if (Array.isArray(msg) && msg[0] === "gpuplay_notice" && msg[1]) {
      showNotice(String(msg[1].title || ""), String(msg[1].detail || ""), msg[1].restart !== false);
    }
  }

  function connect() {
    clearTimeout(retryTimer);
    hideNotice();
    term.connect();
    const socket = term.socket;
    socket.addEventListener("open", () => {
      attempt = 0;
      if (window.gpuplay) window.gpuplay.connections += 1;
      hideBanner();
      term.terminal.reset(); // the app draws its whole screen anew
      term.fit();
      focusTerminal();
    });
    socket.addEventListener("message", onMessage);
    socket.addEventListener("close", (ev) => {
      if (socket !== term.socket) return;
      if (FINAL_CLOSE.has(ev.code)) {
        if ($("notice").hidden) showNotice("Session ended", ev.reason || "", true);
        return;
      }
      scheduleReconnect("connection lost");
    });
  }

  function onKeyDown(ev) {
    if (!term) return;
    const mod = ev.ctrlKey || ev.metaKey;
    // Font size: ctrl +, ctrl -, ctrl 0 (instead of the browser's zoom); + and - alone in a talk.
    const plus = ev.key === "+" || ev.key === "=";
    const minus = ev.key === "-" || ev.key === "_";
    if ((mod && !ev.altKey) || (talk && !mod && !ev.altKey)) {
      if (plus || minus || (mod && ev.key === "0")) {
        if (!mod && ev.key === "=") return; // a bare "=" stays the app's
        ev.preventDefault();
        ev.stopPropagation();
        if (ev.key === "0") setFontSize(parseInt(document.body.dataset.fontSize, 10) || 16);
        else setFontSize(fontSize() + (plus ? 2 : -2));
        return;
      }
    }
    if (!$("notice").hidden) return; // the notice's button takes Enter and space
    const ta = textarea();
    if (ta && document.activeElement === ta) return; // xterm has it
    // The page had the focus (before any click, after a reload): hand the key to the app.
    let data = KEY_SEQUENCES[ev.key];
    if (data === undefined && ev.key.length === 1 && !mod && !ev.altKey) data = ev.key;
    if (data !== undefined) {
      ev.preventDefault();
      ev.stopPropagation();
      send(data);
    }
    focusTerminal();
  }

  async function start() {
    stripTokenFromAddressBar();
    talk = document.body.dataset.talk === "1";
    fontKey = talk ? "gpuplay.fontSize.talk" : "gpuplay.fontSize";
    const el = $("terminal");
    el.dataset.sessionWebsocketUrl = websocketUrl();
    const size = storedFontSize(parseInt(document.body.dataset.fontSize, 10) || 16);
    el.dataset.fontSize = String(size);
    $("notice-button").addEventListener("click", () => {
      hideNotice();
      attempt = 0;
      probeAndConnect();
    });
    if (typeof window.TextualTerminal !== "function") {
      showNotice("This page cannot start", "textual-serve's terminal script did not load.", false);
      return;
    }
    try {
      // xterm measures its cells when it opens: with the local font loaded, not a fallback.
      await Promise.race([
        document.fonts.load(size + "px 'Roboto Mono'"),
        new Promise((resolve) => setTimeout(resolve, 1500)),
      ]);
    } catch (e) {
      /* the fallback font then */
    }
    term = new window.TextualTerminal(el, { ping: null });
    term.terminal.options.fontSize = size;
    term.fit();
    window.addEventListener("keydown", onKeyDown, true);
    window.addEventListener("focus", focusTerminal);
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") focusTerminal();
    });
    // for tests and the curious: the terminal, and how many times the websocket (re)opened
    window.gpuplay = { term: term, setFontSize: setFontSize, connections: 0 };
    connect();
    focusTerminal();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
