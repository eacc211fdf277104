// The console of chatcli-mw serve: three views, each drawn from the JSON the proxy serves
// under /ui/api/, polled every POLL_MS. The sessions list and the proxy page are redrawn
// when their version moves; a session's page holds a page of its requests at a time
// (older ones on demand) and asks only what changed since: the requests after the newest
// it shows, and the bills of those it shows without one, redrawing only those. Requests
// are told apart by their seq in the records database every replica writes to. No
// library: every text from the proxy is set as text (never parsed as HTML).
"use strict";

const POLL_MS = 2000;
const PAGE = 25; // requests fetched at a time on a session's page
const MOST = 100; // the most the proxy sends at once (a poll after a burst asks again),
// and the most requests a poll asks the bills of
const KINDS = ["input", "cache_read", "cache_write_5m", "cache_write_1h", "output"];
const view = document.getElementById("view");
const status = document.getElementById("status");
let shown = { route: null, version: null };
let sort = { key: "last", desc: true };
let filter = "";
let agentFilter = "";
// Asked of the proxy: the sums of the answers of one caller (its key's digest, as
// /sessions?key= and chatcli-mw ledger --key take it) and with every tag given.
let keyFilter = "";
let tagFilter = "";
const opened = new Set(); // full outputs open, by "session/file"

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "style") node.style.cssText = value; // the CSP refuses style attributes
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// One form on every page, whatever the browser's locale: numbers as the command line
// prints them (1,234), dollars to four places (-$0.0002), dates in ISO 8601, the browser's
// local time to the second (2026-12-02 06:59:45).
const number = (n) => (n === null || n === undefined ? "—" : Number(n).toLocaleString("en-US"));
const dollars = (d) => {
  if (d === null || d === undefined) return "—";
  const shown = Math.abs(Number(d)).toFixed(4);
  return (Number(d) < 0 && Number(shown) !== 0 ? "-$" : "$") + shown;
};
const two = (n) => String(n).padStart(2, "0");
const clock = (d) => `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
const iso = (d) => `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${clock(d)}`;
const when = (t) => (t ? iso(new Date(t * 1000)) : "—");
const bytes = (b) => (b === null || b === undefined ? "—" : b >= 1048576
  ? (b / 1048576).toFixed(1) + " MiB" : b >= 1024 ? (b / 1024).toFixed(1) + " KiB" : b + " B");

async function getJSON(path) {
  const answer = await fetch(path, { cache: "no-store" });
  if (!answer.ok) throw new Error(`${path}: ${answer.status} ${await answer.text()}`);
  return answer.json();
}

function route() {
  const hash = location.hash || "#/";
  if (hash.startsWith("#/session/")) {
    return { page: "session", id: decodeURIComponent(hash.slice("#/session/".length)) };
  }
  return { page: hash === "#/proxy" ? "proxy" : "sessions" };
}

let pending = 0; // fetches under way: a tick of the poll waits for them
let chain = Promise.resolve();

// A session's fetches one at a time, in the order asked (a poll and a page of older
// requests never draw over each other).
function inTurn(task) {
  const turn = chain.then(task);
  chain = turn.catch(() => {});
  return turn;
}

async function refresh(force) {
  const here = route();
  const key = JSON.stringify(here);
  const fresh = force || shown.route !== key;
  pending += 1;
  try {
    if (here.page === "session") {
      if (fresh || !live || live.id !== here.id) await inTurn(() => openSession(here.id));
      else await inTurn(pollSession);
      shown = { route: key, version: null };
    } else {
      live = null;
      const data = await getJSON(here.page === "proxy" ? "/ui/api/proxy" : sessionsPath());
      if (fresh || shown.version !== data.version) {
        const scroll = window.scrollY;
        const focused = document.activeElement && document.activeElement.id;
        view.replaceChildren(...draw(here, data).flat().filter((child) => child));
        if (shown.route === key) window.scrollTo(0, scroll);
        if (focused) {
          const again = document.getElementById(focused);
          if (again) { again.focus(); if (again.setSelectionRange) again.setSelectionRange(9e9, 9e9); }
        }
      }
      shown = { route: key, version: data.version };
    }
    status.textContent = "live · updated " + clock(new Date());
    status.className = "";
  } catch (error) {
    status.textContent = String(error.message || error);
    status.className = "error";
  } finally {
    pending -= 1;
  }
  for (const link of document.querySelectorAll("nav a")) {
    link.classList.toggle("here", link.id === "nav-" + (here.page === "proxy" ? "proxy" : "sessions"));
  }
}

function draw(here, data) {
  if (here.page === "proxy") return proxyPage(data);
  return sessionsPage(data);
}

// -- Sessions ----------------------------------------------------------------------------

// A kind of token as a column says it: "Cache write 5m".
const kindLabel = (k) => k[0].toUpperCase() + k.slice(1).replace(/_/g, " ");

const COLUMNS = [
  ["agent", "Agent", (r) => r.agent || "", "text"],
  ["session", "Session", (r) => r.session, "text"],
  ["requests", "Requests", (r) => r.requests],
  ...KINDS.map((k) => [k, kindLabel(k), (r) => (r.billed ? r.billed[k] : null)]),
  ["billed", "Billed", (r) => (r.billed ? r.billed.dollars : null)],
  ["without", "Without", (r) => (r.without ? r.without.dollars : null)],
  ["saved", "Saved", (r) => r.saved_dollars],
  ["repairs", "Repairs", (r) => r.repairs],
  ["spills", "Spills", (r) => r.spills],
  ["compactions", "Compactions", (r) => r.compactions],
  ["last", "Last seen", (r) => r.last],
];
const DOLLARS = new Set(["billed", "without", "saved"]);
const PRICE_HINT = "No answer of this model was priced: add its price to the policy, " +
  "ledger.prices.MODEL: {input: 3, output: 15} (dollars per million tokens).";

// Dollars, or "not priced" where none of the answers had a price (never $0.0000, as if
// free, nor a saving).
function money(priced, value) {
  return priced ? dollars(value) : el("span", { class: "unpriced muted", title: PRICE_HINT }, "not priced");
}

// A session (or the total) billed, none of whose answers had a price.
const unpriced = (r) => Boolean(r && r.billed && !r.priced && r.unpriced);

function cell(key, value, row) {
  if (key === "last") return when(value);
  if (DOLLARS.has(key) && unpriced(row)) return money(false);
  if (DOLLARS.has(key)) return dollars(value);
  if (typeof value === "number") return number(value);
  return value === null || value === undefined || value === "" ? "—" : value;
}

function sessionsPath() {
  const query = new URLSearchParams();
  if (keyFilter.trim()) query.append("key", keyFilter.trim());
  for (const tag of tagFilter.split(/[,\s]+/).filter((t) => t.includes("="))) query.append("tag", tag);
  const asked = query.toString();
  return "/ui/api/sessions" + (asked ? "?" + asked : "");
}

function sessionsPage(data) {
  const agents = [...new Set(data.sessions.map((r) => r.agent).filter(Boolean))].sort();
  const rows = data.sessions.filter((r) =>
    (!agentFilter || r.agent === agentFilter) &&
    (!filter || [r.session, r.agent || "", r.caller || ""].join(" ").toLowerCase()
      .includes(filter.toLowerCase())));
  const column = COLUMNS.find((c) => c[0] === sort.key) || COLUMNS[COLUMNS.length - 1];
  rows.sort((a, b) => {
    const x = column[2](a), y = column[2](b);
    const order = x === y ? 0 : x === null || x === undefined ? -1 : y === null || y === undefined
      ? 1 : x < y ? -1 : 1;
    return sort.desc ? -order : order;
  });
  const head = el("tr", {}, COLUMNS.map(([key, label, , kind]) => el("th", {
    class: ["sortable", kind || "", sort.key === key ? (sort.desc ? "sorted-desc" : "sorted-asc") : ""]
      .join(" ").trim(),
    "data-key": key,
    onclick: () => { sort = { key, desc: sort.key === key ? !sort.desc : key !== "agent" && key !== "session" };
      refresh(true); },
  }, label)));
  const body = rows.map((r) => el("tr", { "data-session": r.session }, COLUMNS.map(([key, , get, kind]) => {
    const value = get(r);
    if (key === "session") {
      return el("td", { class: "text session" },
        el("a", { href: "#/session/" + encodeURIComponent(r.session), title: r.session }, r.session));
    }
    return el("td", { class: [kind || "", key === "saved" && value > 0 && !unpriced(r) ? "saved" : ""].join(" ").trim() || null },
      cell(key, value, r));
  })));
  const t = data.total;
  const total = el("tr", { class: "total" }, COLUMNS.map(([key]) => {
    const value = key === "agent" ? "All" : key === "session" ? `${number(t.sessions)} in the ledger`
      : key === "requests" ? t.requests : KINDS.includes(key) ? t.billed[key]
      : key === "billed" ? t.billed.dollars : key === "without" ? t.without.dollars
      : key === "saved" ? t.saved_dollars : key === "last" ? t.last : null;
    return el("td", { class: key === "agent" || key === "session" ? "text" : null }, cell(key, value, t));
  }));
  return [
    el("h1", {}, "Sessions"),
    data.console ? null : el("p", { class: "muted" },
      "proxy.console.enabled is false: the ledger's sums only, no record of what the steps did."),
    el("div", { class: "filters" },
      el("input", { id: "filter", type: "search", placeholder: "filter by session, agent or key", value: filter,
        oninput: (e) => { filter = e.target.value; refresh(true); } }),
      el("input", { id: "key-filter", type: "search", placeholder: "key (its digest)", value: keyFilter,
        title: "the sums of one caller's answers: the digest of its API key, as /sessions?key= takes it",
        onchange: (e) => { keyFilter = e.target.value; refresh(true); } }),
      el("input", { id: "tag-filter", type: "search", placeholder: "tags: team=infra", value: tagFilter,
        title: "the sums of the answers with every tag given (x-chatcli-tags), name=value by commas",
        onchange: (e) => { tagFilter = e.target.value; refresh(true); } }),
      el("select", { id: "agent-filter", onchange: (e) => { agentFilter = e.target.value; refresh(true); } },
        el("option", { value: "" }, "every agent"),
        agents.map((a) => el("option", { value: a, selected: a === agentFilter }, a))),
      el("span", { class: "muted" }, `${rows.length} of ${data.sessions.length} sessions; tokens billed by kind`
        + (data.filters && (data.filters.key || data.filters.tags.length)
          ? "; sums of the answers " + [data.filters.key ? "of key " + data.filters.key : "",
            data.filters.tags.length ? "tagged " + data.filters.tags.join(", ") : ""].filter(Boolean).join(" and ")
          : ""))),
    // Wider than the page (a narrow window), the table scrolls in its box, header and all.
    el("div", { class: "scroll" },
      el("table", { id: "sessions" }, el("thead", {}, head), el("tbody", {}, body, total))),
  ];
}

// -- A session ---------------------------------------------------------------------------

// Where a session's key came from (SessionKey.source), in words; the header or field in a
// code span, the source's own name in the title.
const SOURCES = {
  opening: "a digest of how the conversation opens (no session named)",
  call_ids: "a digest of its first reply's call ids (no session named)",
  joined: "joined to the conversation of its Gemini CLI run (no session named)",
  given: "given by the caller",
};
const BODY_FIELDS = new Set(["prompt_cache_key", "conversation", "metadata.user_id"]);

function sourceView(source) {
  if (!source) return "—";
  const words = SOURCES[source] ? SOURCES[source]
    : [BODY_FIELDS.has(source) ? "the request body's " : "the header ", el("code", {}, source)];
  return el("span", { class: "source", title: `source: ${source}` }, words);
}

function kv(...pairs) {
  return el("div", { class: "kv" }, pairs.map((item, i) => el("span", { class: i % 2 ? null : "muted" }, item)));
}

// The session on screen: its requests drawn (cards and records, by seq), the newest and
// oldest of them, and whether the records keep older ones.
let live = null;

function sessionPath(id, query) {
  return "/ui/api/sessions/" + encodeURIComponent(id) + "?" + new URLSearchParams(query);
}

async function openSession(id) {
  const data = await getJSON(sessionPath(id, { limit: PAGE }));
  const here = route();
  if (here.page !== "session" || here.id !== id) return; // the page moved on meanwhile
  const parts = {
    facts: el("div", { id: "facts" }),
    chart: el("div", { id: "chart-box" }),
    heading: el("h2", { id: "requests-heading" }),
    removed: el("p", { class: "muted", id: "removed" }),
    cards: el("div", { class: "cards", id: "requests" }),
    older: el("button", { type: "button", id: "older", onclick: () => loadOlder() }, "Older requests"),
  };
  live = { id, epoch: data.epoch, cards: new Map(), records: new Map(), newest: null, oldest: null,
    older: data.older, parts };
  view.replaceChildren(
    el("p", {}, el("a", { href: "#/" }, "← Sessions")),
    el("h1", {}, "Session ", el("code", {}, id)),
    parts.facts,
    el("h2", {}, "Running cost"),
    parts.chart,
    parts.heading,
    parts.removed,
    parts.cards,
    el("p", {}, parts.older));
  for (const q of data.requests.slice().reverse()) place(q, true);
  sessionHead(data);
}

// The newest requests drawn without a bill (MOST at most): a poll asks for their bills.
function unbilled(here) {
  const waiting = [];
  for (const q of here.records.values()) if (!q.bill) waiting.push(q.seq);
  return waiting.sort((a, b) => b - a).slice(0, MOST);
}

// What changed since the page last asked: the requests after the newest drawn, and the
// bills of those drawn without one, each drawn in place; the counts, the bill and the
// chart are drawn again (their size is fixed).
async function pollSession() {
  const here = live;
  if (!here) return;
  for (;;) {
    const query = { after: here.newest === null ? 0 : here.newest, limit: MOST };
    const waiting = unbilled(here);
    if (waiting.length) query.bills = waiting.join(",");
    const data = await getJSON(sessionPath(here.id, query));
    if (live !== here) return; // the page moved on meanwhile
    const gone = here.newest !== null && (data.last === null || data.last < here.newest);
    if (data.epoch !== here.epoch || gone) { await openSession(here.id); return; } // another database
    for (const q of data.requests) place(q, false);
    for (const [seq, bill] of Object.entries(data.bills)) {
      const q = here.records.get(Number(seq));
      if (q && !q.bill) { q.bill = bill; place(q, false); }
    }
    sessionHead(data);
    if (!data.more) return;
  }
}

async function loadOlder() {
  pending += 1;
  try {
    await inTurn(async () => {
      const here = live;
      if (!here || here.oldest === null) return;
      const data = await getJSON(sessionPath(here.id, { before: here.oldest, limit: PAGE }));
      if (live !== here) return;
      for (const q of data.requests.slice().reverse()) place(q, true);
      here.older = data.older;
      sessionHead(data, true);
    });
  } catch (error) {
    status.textContent = String(error.message || error);
    status.className = "error";
  } finally {
    pending -= 1;
  }
}

// Draw request q's card where its seq puts it (newest first), or in place of the one drawn
// before. One older than those drawn waits for its page, unless it comes with it.
function place(q, paging) {
  const { cards, parts } = live;
  const before = cards.get(q.seq);
  if (!before && !paging && live.oldest !== null && q.seq < live.oldest && live.older) return;
  const card = requestCard(live.id, q);
  if (before) {
    before.replaceWith(card);
  } else if (live.newest === null || q.seq > live.newest) {
    parts.cards.prepend(card);
  } else if (q.seq < live.oldest) {
    parts.cards.append(card);
  } else {
    let next = parts.cards.firstElementChild;
    while (next && Number(next.dataset.seq) > q.seq) next = next.nextElementSibling;
    parts.cards.insertBefore(card, next);
  }
  cards.set(q.seq, card);
  live.records.set(q.seq, q);
  live.newest = live.newest === null ? q.seq : Math.max(live.newest, q.seq);
  live.oldest = live.oldest === null ? q.seq : Math.min(live.oldest, q.seq);
}

// The session's facts, its chart (when the answer has it), and how many requests are kept
// and drawn.
function sessionHead(data, paging) {
  const { parts } = live;
  const r = data.row;
  if (!paging) {
    parts.facts.replaceChildren(kv(
      "Agent", r.agent || "—", "Session key from", sourceView(r.source), "Format", r.format || "—",
      "Requests", number(r.requests),
      "Billed", money(!unpriced(r), r.billed && r.billed.dollars),
      "Estimate without the middleware", money(!unpriced(r), r.without && r.without.dollars),
      r.observe && r.observe.answers ? "Saving (of the requests cleaned)" : "Saving", unpriced(r) ? money(false)
        : el("span", { class: "saved", id: "saving", "data-dollars": r.saved_dollars }, dollars(r.saved_dollars)),
      ...(r.readbacks && r.readbacks.count ? ["Read-backs (what the proxy hid, read again)",
        `${number(r.readbacks.count)}, costing ${dollars(r.readbacks.dollars)}`,
        "Effective saving", unpriced(r) ? money(false) : dollars(r.effective_saved_dollars)] : []),
      ...(r.observe && r.observe.answers ? ["Observe mode: would have saved",
        el("span", { id: "would-have-saved", "data-dollars": r.observe.would_have_saved_dollars },
          `${dollars(r.observe.would_have_saved_dollars)} (${number(r.observe.projected)} of ` +
          `${number(r.observe.answers)} requests projected: ${dollars(r.observe.billed_dollars)} billed, ` +
          `${dollars(r.observe.would_have_dollars)} cleaned)`)] : []),
      ...(r.refused ? ["Requests a repair saved from a 400", number(r.refused)] : []),
      "Repairs · spills · compactions", `${number(r.repairs)} · ${number(r.spills)} · ${number(r.compactions)}`,
      "Last seen", when(r.last)));
    if (data.costs) parts.chart.replaceChildren(chart(data.costs));
    if (live.oldest !== null && data.first !== null) live.older = data.first < live.oldest;
  }
  parts.heading.textContent =
    `Requests (${number(data.kept)} kept, ${number(live.cards.size)} shown, newest first)`;
  parts.removed.textContent = data.removed
    ? `The records of ${number(data.removed)} earlier requests were removed (ledger.keep_days, ledger.console_bytes).`
    : "";
  parts.removed.hidden = !data.removed;
  parts.older.hidden = !live.older;
}

// The running cost: [answer, billed so far, without so far] after some of the session's
// priced answers, the last included (the proxy sends a few hundred points at most).
function chart(points) {
  if (!points || !points.length) return el("p", { class: "muted", id: "chart" }, "No priced answer yet.");
  const W = 640, H = 220, L = 64, B = 28, T = 10, R = 10;
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("id", "chart");
  svg.setAttribute("width", W); svg.setAttribute("height", H);
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const top = Math.max(...points.map((p) => Math.max(p[1], p[2]))) || 1;
  const first = points[0][0], last = points[points.length - 1][0];
  const x = (n) => L + (last === first ? (W - L - R) / 2 : (n - first) / (last - first) * (W - L - R));
  const y = (d) => H - B - d / top * (H - B - T);
  const add = (tag, attrs, text) => {
    const node = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    svg.append(node);
    return node;
  };
  add("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#9ca3af" });
  add("line", { x1: L, y1: T, x2: L, y2: H - B, stroke: "#9ca3af" });
  for (const f of [0, 0.5, 1]) {
    add("text", { x: L - 6, y: y(top * f) + 4, "text-anchor": "end" }, "$" + (top * f).toFixed(4));
  }
  add("text", { x: L, y: H - 8 }, `answer ${first}`);
  add("text", { x: W - R, y: H - 8, "text-anchor": "end" }, `answer ${last}`);
  for (const [index, color, name] of [[2, "#2563eb", "without"], [1, "#c2410c", "billed"]]) {
    add("polyline", { points: points.map((p) => `${x(p[0])},${y(p[index])}`).join(" "), fill: "none",
      stroke: color, "stroke-width": 2, "data-series": name });
    for (const p of points) add("circle", { cx: x(p[0]), cy: y(p[index]), r: 3, fill: color });
  }
  const end = points[points.length - 1];
  return el("div", {},
    el("div", { class: "legend" },
      el("span", {}, el("span", { class: "swatch", style: "background:#c2410c" }), `billed ${dollars(end[1])}`),
      el("span", {}, el("span", { class: "swatch", style: "background:#2563eb" }),
        `estimate without the middleware ${dollars(end[2])}`)),
    svg);
}

function requestCard(session, q) {
  const bill = q.bill;
  const tokens = bill && !bill.unread ? el("table", { class: "tokens" },
    el("tr", {}, el("th", { class: "text" }, "tokens"), KINDS.map((k) => el("th", {}, k.replace(/_/g, " "))),
      el("th", {}, "dollars")),
    el("tr", {}, el("td", { class: "text" }, "billed"), KINDS.map((k) => el("td", {}, number(bill.billed[k]))),
      el("td", {}, money(bill.dollars !== null, bill.dollars))),
    bill.observed ? null : el("tr", {}, el("td", { class: "text" }, "without"),
      KINDS.map((k) => el("td", {}, number(bill.without[k]))),
      el("td", {}, money(bill.dollars_without !== null, bill.dollars_without))),
    bill.projected ? el("tr", {}, el("td", { class: "text" }, "cleaned, would have been"),
      KINDS.map((k) => el("td", {}, number(bill.projected[k]))),
      el("td", {}, money(bill.dollars_projected !== null, bill.dollars_projected))) : null)
    : el("p", { class: "muted" }, bill ? "Its answer reported no usage the ledger could read." : "No answer billed yet.");
  const notes = bill && !bill.unread ? [
    bill.observed ? el("p", { class: "observed" }, "Observe mode: this request went upstream as it came. " +
      "The steps below are what cleaning would have done; the bill is the request's own.") : null,
    bill.refused ? el("p", { class: "refused" }, "As it came, the provider would have refused this request " +
      `(a repair made it valid, which is not counted as a saving): ${bill.refused}`) : null,
    bill.readbacks ? el("p", { class: "readback" }, `${bill.readbacks} read-back${bill.readbacks === 1 ? "" : "s"} ` +
      `of what the proxy hid, costing ${dollars(bill.dollars_readback)}`) : null,
  ] : [];
  const facts = [
    q.format, when(q.time), q.replica ? `replica ${q.replica}` : null,
    q.messages ? `messages ${q.messages[0]} → ${q.messages[1]}` : null,
    q.chars ? `tool-result characters ${number(q.chars[0])} → ${number(q.chars[1])}` : null,
    q.continued ? "continued the previous request" : null,
    q.untouched ? `forwarded untouched: ${q.untouched}` : null,
    bill && bill.model ? `model ${bill.model}` : null,
  ].filter(Boolean).join(" · ");
  const steps = q.steps || [];
  return el("div", { class: "card request", "data-n": q.n, "data-seq": q.seq },
    el("h3", {}, `Request ${q.n}`),
    el("div", { class: "muted" }, facts),
    q.error ? el("p", { class: "error" }, q.error) : null,
    tokens,
    notes,
    readBacks(q),
    steps.length ? steps.map((s) => stepView(session, s))
      : el("p", { class: "muted" }, "No step changed anything new in this request."),
    q.repeated ? el("p", { class: "muted" }, `${actions(q.repeated, "earlier")} applied again, as decided before.`)
      : null,
    q.omitted ? el("p", { class: "muted" },
      `${actions(q.omitted, "more")} not kept (proxy.console.request_bytes).`) : null);
}

const actions = (n, which) => `${number(n)} ${which} action${n === 1 ? "" : "s"}`;

// What the agent went back for in this request, and the step that had hidden it.
const READ_BACK_WORDS = {
  spill_file: (r) => `${r.tool} of ${r.path}`,
  recall: (r) => `${r.tool}: a recall of ${r.path}`,
  reread: (r) => `${r.tool} of ${r.path} again`,
};
const HIDDEN_BY = { budget: "spilled by budget", microcompact: "compacted by microcompact" };

function readBacks(q) {
  const found = q.readbacks || [];
  if (!found.length) return null;
  return el("div", { class: "readbacks" }, found.map((r) => el("div", { class: "readback-call", "data-kind": r.kind },
    el("strong", {}, "read back: "), (READ_BACK_WORDS[r.kind] || READ_BACK_WORDS.spill_file)(r),
    ` (${HIDDEN_BY[r.step] || r.step})`,
    el("span", { class: "muted" }, ` · call ${r.call} · ${number(r.chars)} characters brought back`))),
  q.readbacks_omitted ? el("p", { class: "muted" }, `${q.readbacks_omitted} more read-backs not kept.`) : null);
}

const WORDS = {
  synthetic_result: "inserted a result for a call that had none",
  orphan_dropped: "dropped a result that answers no call",
  duplicate_result_dropped: "dropped a second result of one call",
  duplicate_call_dropped: "dropped a repeated call",
  unnamed_call_dropped: "dropped a call with no tool name",
  result_relocated: "moved a result next to its call",
  result_paired_by_position: "paired a result without id with the call before it",
  user_turn_added: "added a user message at the end",
  id_renamed: "renamed a call id",
  id_generated: "gave a call an id",
  empty_message_removed: "removed a message left empty",
  reasoning_dropped: "dropped a reasoning item",
  spilled: "spilled an output to the store",
  truncated_unsaved: "cut an output it could not save",
  spill_failed: "kept an output whole: the store failed",
  empty_replaced: "replaced an empty result",
  truncated: "compacted an old output to its head and tail",
  summarized: "compacted an old output to a summary",
  input_cleared: "cleared an old call's input",
  compaction_skipped: "left an old output: the store failed",
};

// Why the budget step cut an output, in words; the policy key or setting behind it in a
// code span, the reason's own key in the title (the report's and the JSON's word for it).
const REASONS = {
  result_cap: (s) => (s.cap === undefined ? "longer than the cap on one output"
    : [`longer than its cap of ${number(s.cap)} characters, set by `, el("code", {}, s.cap_source)]),
  turn_budget: () => ["the outputs of its turn were over their budget together, ",
    el("code", {}, "budget.turn_budget_chars")],
  line_rule: () => ["more lines or bytes than its tool's line rule keeps, ", el("code", {}, "tools.*.lines")],
};

function reasonView(s) {
  const words = REASONS[s.reason] ? REASONS[s.reason](s)
    : /^[a-z]+(_[a-z]+)+$/.test(s.reason) ? s.reason.replace(/_/g, " ") : s.reason;
  return el("div", { class: "muted reason", "data-reason": s.reason, title: `reason: ${s.reason}` }, words);
}

function stepView(session, s) {
  const file = s.path ? s.path.replace(/\\/g, "/").split("/").pop() : null;
  const full = file ? fullView(session, file) : null;
  return el("div", { class: "step " + s.step, "data-kind": s.kind },
    el("div", {}, el("strong", {}, `${s.step}: ${WORDS[s.kind] || s.kind.replace(/_/g, " ")}`),
      " ", el("span", { class: "muted" },
        [s.tool, s.call ? `call ${s.call}` : null, `${number(s.chars[0])} → ${number(s.chars[1])} characters`,
          s.age !== undefined ? `${number(s.age)} turn${s.age === 1 ? "" : "s"} old` : null]
          .filter(Boolean).join(" · "))),
    s.reason ? reasonView(s) : null,
    s.error ? el("div", { class: "error" }, s.error) : null,
    s.path ? el("div", { class: "muted" }, "saved at ", el("code", {}, s.path)) : null,
    s.seen !== undefined ? [el("div", {}, s.kind === "synthetic_result" ? "What it inserted:" : "What the model saw instead:"),
      el("pre", { class: "seen" }, s.seen)] : null,
    s.dropped !== undefined ? [el("div", {}, "What it dropped:"), el("pre", { class: "dropped" }, s.dropped)] : null,
    full);
}

const fullTexts = new Map();

// A spilled output's button, and its full text once asked for: drawn again in place (in
// every card that shows it) when it is opened, read, or closed.
function fullView(session, file) {
  const key = session + "/" + file;
  return el("div", { class: "full", "data-key": key },
    el("button", { type: "button", class: "fetch-full", onclick: () => showFull(session, file) },
      opened.has(key) ? "Hide the full output" : "Fetch the full output from the spill store"),
    opened.has(key) ? fullOutput(session, file) : null);
}

function fullOutput(session, file) {
  const key = session + "/" + file;
  const text = fullTexts.get(key);
  return el("pre", { class: "full-text" }, text === undefined ? "Reading the spill store…" : text);
}

function redrawFull(session, file) {
  const key = session + "/" + file;
  for (const box of document.querySelectorAll("div.full")) {
    if (box.dataset.key === key) box.replaceWith(fullView(session, file));
  }
}

async function showFull(session, file) {
  const key = session + "/" + file;
  if (opened.has(key)) { opened.delete(key); redrawFull(session, file); return; }
  opened.add(key);
  redrawFull(session, file);
  if (!fullTexts.has(key)) {
    try {
      // The console's own reads are not counted as the agent's recalls.
      const answer = await fetch(`/recall/${encodeURIComponent(session)}/${encodeURIComponent(file)}`,
        { headers: { "x-chatcli-console": "1" } });
      const text = await answer.text();
      fullTexts.set(key, answer.ok ? text : `${answer.status}: ${text}`);
    } catch (error) {
      fullTexts.set(key, String(error));
    }
  }
  redrawFull(session, file);
}

// -- The proxy ---------------------------------------------------------------------------

function proxyPage(data) {
  const p = data.policy;
  const reloads = Object.entries(data.policies).map(([name, s]) => el("tr", {},
    el("td", { class: "text" }, name), el("td", { class: "text" }, s.source), el("td", {}, s.generation),
    el("td", { class: "text" }, s.last_reload_ok ? "ok" : el("span", { class: "error" }, "rejected")),
    el("td", {}, when(s.last_success_at)), el("td", {}, s.rejected_edits),
    el("td", { class: "text" + (s.last_error ? " error" : "") },
      s.last_error ? `kept the last good policy: ${s.last_error}` : "—")));
  const counts = (map, what) => Object.keys(map).length
    ? el("table", {}, el("tr", {}, el("th", { class: "text" }, what), el("th", {}, "requests")),
      Object.entries(map).sort().map(([k, v]) => el("tr", {}, el("td", { class: "text" }, k), el("td", {}, number(v)))))
    : el("p", { class: "muted" }, "None.");
  return [
    el("h1", {}, "The proxy"),
    el("h2", {}, "Policy in effect"),
    kv("Name", p.name, "Source", p.source, "Files", p.files.join(", ") || "—"),
    el("h2", {}, "Settings away from their defaults"),
    p.set.length ? el("table", { id: "policy-set" },
      el("tr", {}, el("th", { class: "text" }, "key"), el("th", { class: "text" }, "value"), el("th", { class: "text" }, "set by")),
      p.set.map((k) => el("tr", {}, el("td", { class: "text" }, k.key),
        el("td", { class: "text" }, typeof k.value === "string" ? k.value : JSON.stringify(k.value)),
        el("td", { class: "text" }, k.origin))))
      : el("p", { class: "muted" }, "Every key at its default."),
    el("h2", {}, "Reloads"),
    el("table", { id: "reloads" }, el("tr", {}, ["policy", "source", "generation", "last reload", "swapped in at",
      "rejected edits", "error"].map((h, i) => el("th", { class: i < 2 || i === 3 || i === 6 ? "text" : null }, h))),
    reloads),
    el("h2", {}, "Upstreams"),
    el("table", { id: "upstreams" }, Object.entries(data.upstreams).map(([k, v]) =>
      el("tr", {}, el("td", { class: "text" }, k), el("td", { class: "text" }, v)))),
    el("p", { class: "muted" }, `Other requests go to ${data.other_requests}. Spill store: ${data.spill.url}`,
      data.spill.error ? el("span", { class: "error" }, ` (failing: ${data.spill.error})`) : null),
    el("h2", {}, "Passed through untouched, by reason"),
    counts(data.passthrough, "reason"),
    el("h2", {}, "Not processed, by error"),
    counts(data.failures, "error"),
    el("h2", {}, "Memory budgets"),
    el("table", { id: "memory" }, el("tr", {}, el("th", { class: "text" }, "budget"), el("th", {}, "held"),
      el("th", {}, "limit"), el("th", { class: "text" }, "full")),
    data.memory.map((m) => el("tr", {}, el("td", { class: "text" }, m.name), el("td", {}, bytes(m.bytes)),
      el("td", {}, bytes(m.limit)), el("td", { class: "text" }, m.full === null ? "—" : el("span", {},
        el("span", { class: "bar" + (m.full > 0.9 ? " high" : "") },
          el("span", { style: `width:${Math.min(100, m.full * 100).toFixed(1)}%` })),
        ` ${(m.full * 100).toFixed(1)}%`))))),
    el("p", { class: "muted" }, `${number(data.sessions)} sessions held; ${number(data.evictions)} times a session's ` +
      `state was forgotten; ${number(data.console_forgotten)} times the console forgot a session's shown actions.`),
    el("h2", {}, "Records"),
    kv("Database", data.records.url,
      "Reachable", data.records.reachable ? "yes" : el("span", { class: "error" }, `no: ${data.records.error}`),
      "Waiting to be written", bytes(data.records.held_bytes),
      "Dropped · refused", `${number(data.records.dropped)} · ${number(data.records.refused)}`),
  ];
}

window.addEventListener("hashchange", () => refresh(true));
refresh(true);
setInterval(() => { if (!pending) refresh(false); }, POLL_MS);
