// The tenant portal's script (served inline, allowed by its hash in the page's CSP).
// Every value that comes from the server is put into the page with textContent or as a
// Text node: client ids and lease metadata are chosen by whoever runs a client.
const KEY = "seatlease.portal.key"; // sessionStorage only: gone when the tab closes
const REFRESH_MS = 20000;
const SVG = "http://www.w3.org/2000/svg";
const $ = (id) => document.getElementById(id);

let usageDays = 7;
let timer = null;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else if (name === "data") Object.assign(node.dataset, value);
    else node.setAttribute(name, value);
  }
  node.append(...children.map((c) => (c instanceof Node ? c : String(c ?? ""))));
  return node;
}

function svg(tag, attrs = {}, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, String(value));
  if (text !== undefined) node.textContent = text;
  return node;
}

function notice(text, isError = false) {
  const box = $("notice");
  box.textContent = text;
  box.classList.toggle("error", isError);
  box.hidden = !text;
}

class ApiError extends Error {
  constructor(status, body) {
    super(body?.error?.message || `The server answered ${status}.`);
    this.status = status;
    this.code = body?.error?.code;
  }
}

async function call(action, fields = {}) {
  const response = await fetch(location.pathname, {
    method: "POST",
    headers: {
      "Content-Type": "application/json",
      Authorization: `Bearer ${sessionStorage.getItem(KEY) || ""}`,
    },
    body: JSON.stringify({ action, ...fields }),
    cache: "no-store",
    credentials: "omit",
  });
  let body = {};
  try {
    body = await response.json();
  } catch {
    body = {};
  }
  if (!response.ok) throw new ApiError(response.status, body);
  return body;
}

function ago(iso) {
  const seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (seconds < 60) return `${Math.round(seconds)} s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)} min ago`;
  if (seconds < 86400) {
    return `${Math.floor(seconds / 3600)} h ${Math.floor((seconds % 3600) / 60)} min ago`;
  }
  return `${Math.floor(seconds / 86400)} d ago`;
}

// Every time the page shows, in one format with its zone (issue 42): "28 Nov 2026, 03:13
// UTC" in a zone at UTC, "28 Nov 2026, 08:43 UTC+05:30" elsewhere: the browser's zone, its
// offset at that instant (a summer and a winter date may differ). English month names and
// a 24-hour clock whatever the browser's language, so one page never mixes "3:13:10 AM",
// "11/28/2026" and "2027-06-30". The charts' tick labels are this format's day ("28 Nov")
// or time ("03:13"), their zone said once in the note beneath the Usage title.
const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const two = (n) => String(n).padStart(2, "0");

function offsetLabel(date) {
  const minutes = -date.getTimezoneOffset();
  if (minutes === 0) return "UTC";
  const sign = minutes < 0 ? "-" : "+";
  return `UTC${sign}${two(Math.floor(Math.abs(minutes) / 60))}:${two(Math.abs(minutes) % 60)}`;
}

const dayOf = (date) => `${date.getDate()} ${MONTHS[date.getMonth()]}`;
const clockOf = (date) => `${two(date.getHours())}:${two(date.getMinutes())}`;

// A <time> showing `iso` in the page's format (in a narrow column it may break between
// the date and the time, never inside either); with `relative`, followed by how long ago.
function when(iso, relative = false) {
  if (!iso) return "";
  const date = new Date(iso);
  const time = el(
    "time",
    { datetime: iso },
    el("span", { class: "nowrap" }, `${dayOf(date)} ${date.getFullYear()},`),
    " ",
    el("span", { class: "nowrap" }, `${clockOf(date)} ${offsetLabel(date)}`),
  );
  if (!relative) return time;
  return el("span", { class: "when" }, time, " ", el("span", { class: "muted ago nowrap" }, `(${ago(iso)})`));
}

function confirmAction(text, yes) {
  const dialog = $("confirm");
  $("confirm-text").textContent = text;
  $("confirm-yes").textContent = yes;
  dialog.returnValue = "";
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "yes"), { once: true });
    dialog.showModal();
  });
}

async function guarded(work) {
  try {
    await work();
  } catch (error) {
    if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
      signOut(`Signed out: ${error.message}`);
    } else {
      notice(error.message || String(error), true);
    }
  }
}

// -- licenses and leases --------------------------------------------------------------

function otherMetadata(metadata) {
  return Object.entries(metadata || {})
    .filter(([name]) => name !== "user" && name !== "host")
    .map(([name, value]) => `${name}=${value}`)
    .join(", ");
}

// A lease's weight: how many of the license's seats it counts as (1 when the server
// does not say: an older one).
function seatsOf(item) {
  return Number.isInteger(item.seats) && item.seats > 1 ? item.seats : 1;
}

// Issue 50: a lease warned by the license's idle rule (reclaimed at idle_reclaim_at unless
// its program is used by then) and one sharing its seat with other sessions (its user's or
// host's). The fields are absent from an older server: nothing to say.
function leaseState(lease) {
  const parts = [];
  if (lease.idle_reclaim_at) {
    parts.push(el("span", { class: "idle" }, "idle, reclaimed at ", when(lease.idle_reclaim_at), " unless used"));
  }
  if (lease.shared) {
    const sessions = Number.isInteger(lease.shared_sessions) ? lease.shared_sessions : 1;
    const text = `shared by ${sessions} session${sessions === 1 ? "" : "s"}`;
    parts.push(el("span", { class: "shared", title: `share key ${lease.shared}` }, text));
  }
  return parts.flatMap((part, i) => (i ? [" · ", part] : [part]));
}

const hasState = (lease) => Boolean(lease.idle_reclaim_at || lease.shared);

function leaseRow(license, lease, weighted, stated) {
  const free = el("button", { type: "button", class: "small danger" }, "Free seat");
  free.addEventListener("click", () => freeSeat(license, lease));
  const cell = (label, ...content) => el("td", { data: { label } }, ...content);
  const seats = seatsOf(lease);
  // Only a license with a lease of several seats gets the column; "×4" stands out, 1 not.
  // On a phone, where each lease is a card of its own, only the heavy lease's card has the
  // line (the CSS hides a plain lease's "1": it only keeps the table's column aligned).
  const weight = weighted
    ? [
        el(
          "td",
          { class: seats > 1 ? "weight" : "weight plain", data: { label: "Seats" } },
          el("span", { class: seats > 1 ? "seats-weight heavy" : "seats-weight" }, seats > 1 ? `×${seats}` : "1"),
        ),
      ]
    : [];
  return el(
    "tr",
    { data: { session: lease.session_id } },
    cell("Client", el("span", { class: "mono client" }, lease.client_id ?? "")),
    ...weight,
    cell("User", el("span", { class: "user" }, lease.user ?? "")),
    cell("Host", el("span", { class: "host" }, lease.host ?? "")),
    cell("Since", when(lease.acquired_at, true)),
    cell("Expires", when(lease.expires_at)),
    cell("Borrowed", lease.borrowed ? "borrowed" : lease.lingering ? "lingering" : "no"),
    ...(stated ? [cell("State", ...leaseState(lease))] : []),
    cell("Details", el("span", { class: "mono details" }, otherMetadata(lease.metadata))),
    cell("", free),
  );
}

function licenseBlock(license) {
  const limit = Math.max(license.seat_limit ?? license.seats, license.seats_used, 1);
  const title = el("h3", {}, license.license_id);
  if (license.suspended) title.append(el("span", { class: "badge warn" }, "suspended"));
  if (license.overage_in_use) title.append(el("span", { class: "badge warn" }, "overage"));
  const state = license.term_state ?? "perpetual";
  const badges = { in_grace: "in grace", expired: "expired", not_started: "not started" };
  if (badges[state]) title.append(el("span", { class: "badge warn term-state" }, badges[state]));
  const block = el(
    "article",
    { class: "license", data: { license: license.license_id } },
    el(
      "div",
      { class: "license-head" },
      title,
      el("span", { class: "seats" }, `${license.seats_used} / ${license.seats} seats in use`),
    ),
    el("meter", {
      min: "0",
      max: String(limit),
      high: String(license.seats),
      optimum: "0",
      value: String(license.seats_used),
    }),
  );
  // The term (issue 30): when it starts and ends and its grace, a banner before the start,
  // in the grace or after the end, and what it entitles to.
  if (state !== "perpetual" || (license.entitlements ?? []).length > 0) {
    const facts = [termFacts(license)];
    if ((license.entitlements ?? []).length > 0) facts.push([`entitlements: ${license.entitlements.join(", ")}`]);
    if (license.max_version) facts.push([`versions up to ${license.max_version}`]);
    block.append(el("p", { class: "muted term" }, ...facts.flatMap((fact, i) => (i ? [" · ", ...fact] : fact))));
  }
  const rules = rulesText(license);
  if (rules.length > 0) block.append(el("p", { class: "muted rules" }, rules.join(" · ")));
  const banner = (kind, ...text) => el("p", { class: `banner warn ${kind}`, role: "status" }, ...text);
  const expires = () => when(license.expires_at);
  const graceEnds = () => when(license.grace_ends_at);
  if (state === "not_started") {
    block.append(banner("not-started", "This license starts on ", when(license.starts_at), ": no seat is granted before."));
  } else if (state === "in_grace") {
    block.append(banner("grace", "This license expired on ", expires(), " and works until ", graceEnds(), " (its grace). Renew it with your vendor to keep your seats."));
  } else if (state === "expired") {
    block.append(banner("expired", "This license expired on ", expires(), ": no new seat is granted. Renew it with your vendor."));
  }
  if (license.leases.length === 0) {
    block.append(el("p", { class: "muted" }, "No seat is taken."));
  } else {
    const weighted = license.leases.some((lease) => seatsOf(lease) > 1);
    // Only a license with an idle or shared lease gets the State column.
    const stated = license.leases.some(hasState);
    const head = ["Client", ...(weighted ? ["Seats"] : []), "User", "Host", "Since", "Expires", "Borrowed",
      ...(stated ? ["State"] : []), "Details", ""];
    block.append(
      el(
        "div",
        { class: "scroll" },
        el(
          "table",
          { class: "cards" },
          el("thead", {}, el("tr", {}, ...head.map((h) => el("th", {}, h)))),
          el("tbody", {}, ...license.leases.map((lease) => leaseRow(license, lease, weighted, stated))),
        ),
      ),
    );
  }
  // The wait queue (issue 17) when the server reports one.
  if (Array.isArray(license.queue) && license.queue.length > 0) {
    block.append(
      el("h4", {}, `Waiting for a seat: ${license.queue.length}`),
      el(
        "ol",
        { class: "queue" },
        ...license.queue.map((t) =>
          el("li", {}, [t.client_id, t.user, seatsOf(t) > 1 ? `×${seatsOf(t)} seats` : ""].filter(Boolean).join(" · ")),
        ),
      ),
    );
  }
  return block;
}

// A length of time in words: "45 s", "15 min", "2 h", "1 h 30 min", "7 d".
function span(seconds) {
  if (seconds < 60) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 60) return `${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 24) return minutes % 60 ? `${hours} h ${minutes % 60} min` : `${hours} h`;
  const days = Math.floor(hours / 24);
  return hours % 24 ? `${days} d ${hours % 24} h` : `${days} d`;
}

// The license's idle and sharing rules (issue 50) in words; none when off (or from an
// older server, which says neither).
function rulesText(license) {
  const rules = [];
  const timeout = Number.isInteger(license.idle_timeout_seconds) ? license.idle_timeout_seconds : 0;
  if (timeout > 0) {
    const then = license.idle_reclaim === "always" ? "at once" : "when someone needs the seat";
    rules.push(`Idle seats: a program unused for ${span(timeout)} is warned, then its seat is reclaimed ${then}`);
  }
  const by = { user: "user", host: "host", user_host: "user on one host" }[license.share];
  if (by) {
    const limit = Number.isInteger(license.share_limit) ? license.share_limit : 0;
    const room = limit > 0 ? ` (up to ${limit} session${limit === 1 ? "" : "s"} a seat)` : "";
    rules.push(`Shared seats: one ${by}'s sessions share one seat${room}`);
  }
  return rules;
}

const hasGrace = (license) =>
  Boolean(license.expires_at && license.grace_ends_at && license.grace_seconds > 0);

// The term in words, as the server's term_text says it but with the page's times and,
// before its end, its grace: "starts …, expires …, grace until …", "expires … (in 365
// days), no grace", "in grace: expired …, stops …", "expired …", "starts …" (no end) or
// "perpetual" (nodes: the times are <time> elements).
function termFacts(license) {
  const state = license.term_state ?? "perpetual";
  const parts = [];
  if (state === "not_started") parts.push(["starts ", when(license.starts_at)]);
  if (state === "in_grace") {
    parts.push(["in grace: expired ", when(license.expires_at), ", stops ", when(license.grace_ends_at)]);
  } else if (state === "expired") {
    parts.push(["expired ", when(license.expires_at)]);
  } else if (license.expires_at) {
    const days = license.expires_in_days;
    const left = state === "active" && Number.isInteger(days) ? ` (in ${days} day${days === 1 ? "" : "s"})` : "";
    parts.push(["expires ", when(license.expires_at), left]);
    parts.push(hasGrace(license) ? ["grace until ", when(license.grace_ends_at)] : ["no grace"]);
  } else if (state !== "not_started") {
    parts.push(["perpetual"]);
  }
  return parts.flatMap((part, i) => (i ? [", ", ...part] : part));
}

async function loadStatus() {
  const body = await call("status");
  $("tenant").textContent = body.tenant_id ? `Organisation ${body.tenant_id}` : "";
  $("as-of").replaceChildren("As of ", when(body.at));
  const list = $("licenses");
  if (body.licenses.length === 0) {
    list.replaceChildren(el("p", { class: "muted" }, "No license yet."));
  } else {
    list.replaceChildren(...body.licenses.map(licenseBlock));
  }
}

async function freeSeat(license, lease) {
  const who = [lease.client_id, lease.user, lease.host].filter(Boolean).join(" · ");
  const yes = await confirmAction(
    `Free the ${license.license_id} seat held by ${who}? The program loses it at its next heartbeat.`,
    "Free the seat",
  );
  if (!yes) return;
  await guarded(async () => {
    await call("revoke", { license_id: license.license_id, session_id: lease.session_id });
    notice(`Freed the seat held by ${who}.`);
    await loadStatus();
  });
}

// -- usage charts: one small chart per license, drawn at the width it is shown ---------

let lastUsage = null;
const CHART_HEIGHT = 150;
const LABEL_PX = 12; // the charts' text, in CSS pixels at every width (the SVG is not scaled)

function zoneLabel(at = new Date()) {
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";
  const offset = offsetLabel(at);
  if (offset === "UTC" && /^(Etc\/)?(UTC|GMT|Universal|Zulu)$/.test(zone)) return "UTC";
  return `${zone} (${offset === "UTC" ? "UTC+00:00" : offset})`;
}

// The seats in use as step vertices [time, seats] from `since` to `end`: with exact steps
// one step per change; otherwise each period's peak from its start to the next period's,
// then the level held after the last period (`end_level`).
function stepVertices(line, exact, since, end) {
  const vertices = [];
  const hold = (t, v) => {
    const at = Math.min(Math.max(t, since), end);
    if (vertices.length) vertices.push([at, vertices[vertices.length - 1][1]]);
    vertices.push([at, v]);
  };
  if (exact) {
    for (const step of line.steps) hold(Date.parse(step.at), step.seats);
  } else {
    hold(since, line.start_level ?? 0);
    for (const [start, peak] of line.points) hold(Date.parse(start), peak ?? 0);
    if (line.end) hold(Date.parse(line.end), line.end_level ?? 0);
  }
  if (vertices.length === 0) vertices.push([since, line.start_level ?? 0]);
  vertices.push([end, vertices[vertices.length - 1][1]]);
  return vertices;
}

// Where the time axis is labelled: local midnights (every few days, at most `most`
// labels) for spans of days, else evenly spaced times.
const DAY_MS = 86400000;
function tickTimes(since, end, most) {
  if (end - since <= 2 * DAY_MS) {
    return Array.from({ length: most }, (_, i) => since + ((end - since) * (i + 0.5)) / most);
  }
  const midnights = [];
  const day = new Date(since);
  day.setHours(24, 0, 0, 0);
  for (; day.getTime() < end; day.setDate(day.getDate() + 1)) midnights.push(day.getTime());
  const every = Math.max(1, Math.ceil(midnights.length / most));
  return midnights.filter((_, i) => i % every === 0);
}

// A tick's label: the page's format cut short (its zone is in the note): the day ("28
// Nov") over more than 2 days, the day and time ("28 Nov, 03:13") over 1 to 2, the time
// ("03:13") within a day, with its seconds ("03:13:10") within 10 minutes.
function tickLabel(t, span) {
  const date = new Date(t);
  if (span > 2 * DAY_MS) return dayOf(date);
  const time = clockOf(date) + (span <= 10 * 60000 ? `:${two(date.getSeconds())}` : "");
  return span > DAY_MS ? `${dayOf(date)}, ${time}` : time;
}

// Where the charts' time axis starts: the window's start, or, with exact steps, a little
// before the first change when all of the window's use came in its second half (a demo's
// minute of use in a 7-day window would be one pixel wide at the right edge).
function axisStart(body) {
  const since = Date.parse(body.since);
  const end = Math.max(since + 1, Math.min(Date.parse(body.until), Date.now()));
  if (body.period !== "exact") return since;
  let first = end;
  for (const line of body.timelines || []) {
    const steps = Array.isArray(line.steps) ? line.steps : [];
    if (steps.length && steps[0].seats > 0) return since; // seats held from the start
    if (steps.length > 1) first = Math.min(first, Date.parse(steps[1].at));
  }
  if (first >= end || end - first > (end - since) / 2) return since; // use in most of it
  return Math.max(since, first - Math.max(60000, (end - first) * 0.1));
}

function licenseChart(line, body, width, since) {
  const exact = body.period === "exact" && Array.isArray(line.steps);
  const end = Math.max(since + 1, Math.min(Date.parse(body.until), Date.now()));
  const vertices = stepVertices(line, exact, since, end);
  const seats = line.seats ?? line.start_total ?? null;
  const most = Math.max(0, ...vertices.map(([, v]) => v));
  // How many seats it needed (report.sizing): 99 % of the busy minutes' demand met
  const sizing = (body.sizing || {})[line.license_id];
  const needed = sizing ? sizing.recommended_seats.p99 : null;
  const top = Math.max(1, most, seats ?? 0, needed ?? 0);
  const pad = { left: 30, right: 10, top: 10, bottom: 24 };
  const x = (t) => pad.left + ((t - since) / (end - since)) * (width - pad.left - pad.right);
  const y = (v) => CHART_HEIGHT - pad.bottom - (v / top) * (CHART_HEIGHT - pad.top - pad.bottom);
  const title = `${line.license_id}: seats in use, last ${body.days} days`;
  const chart = svg("svg", {
    viewBox: `0 0 ${width} ${CHART_HEIGHT}`,
    width,
    height: CHART_HEIGHT,
    role: "img",
    "aria-label": title,
  });
  for (const v of [...new Set([0, Math.ceil(top / 2), top])]) {
    chart.append(svg("line", { class: "grid", x1: pad.left, x2: width - pad.right, y1: y(v), y2: y(v) }));
    chart.append(svg("text", { x: pad.left - 6, y: y(v) + 4, "text-anchor": "end" }, String(v)));
  }
  chart.append(svg("line", { class: "axis", x1: pad.left, x2: width - pad.right, y1: y(0), y2: y(0) }));
  for (const t of tickTimes(since, end, width < 480 ? 3 : 7)) {
    const at = x(t);
    if (at < pad.left + 18 || at > width - pad.right - 18) continue; // no label cut in half
    chart.append(svg("text", { x: at, y: CHART_HEIGHT - 6, "text-anchor": "middle" }, tickLabel(t, end - since)));
  }
  const points = vertices.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
  const base = `${x(end).toFixed(1)},${y(0).toFixed(1)} ${x(since).toFixed(1)},${y(0).toFixed(1)}`;
  chart.append(svg("polygon", { class: "used-fill", points: `${points} ${base}` }));
  chart.append(svg("polyline", { class: "used", points }));
  if (seats != null) {
    chart.append(svg("line", { class: "limit", x1: pad.left, x2: width - pad.right, y1: y(seats), y2: y(seats) }));
  }
  if (needed != null && needed > 0) {
    chart.append(svg("line", { class: "recommended", x1: pad.left, x2: width - pad.right, y1: y(needed), y2: y(needed) }));
  }
  const changes = exact ? line.steps.length : line.points.length;
  return el(
    "figure",
    { class: "usage-chart", data: { license: line.license_id, period: body.period, changes: String(changes) } },
    el(
      "figcaption",
      {},
      el("strong", {}, line.license_id),
      el("span", { class: "muted" }, ` at most ${most}${seats != null ? ` of ${seats}` : ""} seats in use`),
    ),
    chart,
    el(
      "ul",
      { class: "key" },
      el("li", { class: "key-used" }, exact ? "seats in use" : `peak seats in use per ${body.period}`),
      seats != null ? el("li", { class: "key-limit" }, `seat limit (${seats})`) : "",
      needed != null && needed > 0 ? el("li", { class: "key-recommended" }, `seats needed (${needed})`) : "",
    ),
    sizing
      ? el("p", { class: `sizing ${sizing.verdict}`, data: { verdict: sizing.verdict } },
          el("strong", {}, VERDICTS[sizing.verdict] || sizing.verdict), " ", sizing.sentence)
      : "",
  );
}

// The sizing report's verdicts, as a buyer reads them.
const VERDICTS = { undersized: "Too few seats.", right: "About right.", oversized: "More seats than needed." };

function drawCharts(body) {
  lastUsage = body;
  const box = $("charts");
  const width = Math.max(240, Math.floor(box.clientWidth || 600));
  const lines = body.timelines || [];
  const start = axisStart(body);
  if (lines.length === 0) {
    box.replaceChildren(el("p", { class: "muted" }, "No usage recorded."));
  } else {
    box.replaceChildren(...lines.map((line) => licenseChart(line, body, width, start)));
  }
  const from =
    start > Date.parse(body.since)
      ? [" since just before the first use (", when(new Date(start).toISOString()), ")"]
      : [];
  const what =
    body.period === "exact"
      ? ["Seats in use, a step at each change", ...from]
      : [`Peak seats in use per ${body.period}`];
  $("usage-note").replaceChildren(
    ...what,
    `; the dashed line is the seats you have, the dotted one the seats that would have served 99 % of the busy minutes. Times in ${zoneLabel()}.`,
  );
}

let resizing = 0;
window.addEventListener("resize", () => {
  cancelAnimationFrame(resizing);
  resizing = requestAnimationFrame(() => lastUsage && drawCharts(lastUsage));
});

async function loadUsage() {
  drawCharts(await call("usage", { days: usageDays }));
}

// -- seat keys --------------------------------------------------------------------------

function keyRow(key) {
  const actions = el("td", { data: { label: "" } });
  if (key.active) {
    const revoke = el("button", { type: "button", class: "small quiet" }, "Revoke");
    revoke.addEventListener("click", () => revokeKey(key));
    actions.append(revoke);
  }
  const cell = (label, ...content) => el("td", { data: { label } }, ...content);
  return el(
    "tr",
    { data: { prefix: key.prefix } },
    cell("Key", el("code", {}, key.prefix)),
    cell("Label", key.label),
    cell("Created", when(key.created_at)),
    cell("State", key.active ? "active" : el("span", {}, "revoked ", when(key.revoked_at))),
    actions,
  );
}

async function loadKeys() {
  const body = await call("keys.list");
  const rows = body.api_keys.map(keyRow);
  if (rows.length === 0) rows.push(el("tr", {}, el("td", { colspan: "5" }, "No seat key yet.")));
  $("keys").tBodies[0].replaceChildren(...rows);
}

async function revokeKey(key) {
  const label = key.label ? ` (${key.label})` : "";
  const yes = await confirmAction(
    `Revoke key ${key.prefix}${label}? Programs using it stop getting seats within a minute.`,
    "Revoke the key",
  );
  if (!yes) return;
  await guarded(async () => {
    await call("keys.revoke", { prefix: key.prefix });
    notice(`Revoked key ${key.prefix}.`);
    await loadKeys();
  });
}

// -- webhooks (issue 51): endpoints, their recent deliveries, "send test" ---------------

const listed = (names) => (names && names.length ? names.join(", ") : "all");

function endpointState(endpoint) {
  if (endpoint.state !== "failing") return "ok";
  const since = endpoint.failing_since ? ["failing since ", when(endpoint.failing_since)] : ["failing"];
  return el("span", { class: "failing" }, ...since, endpoint.failing_reason ? `: ${endpoint.failing_reason}` : "");
}

function endpointRow(endpoint) {
  const cell = (label, ...content) => el("td", { data: { label } }, ...content);
  const test = el("button", { type: "button", class: "small quiet" }, "Send test");
  test.addEventListener("click", () => sendTest(endpoint));
  const rotate = el("button", { type: "button", class: "small quiet" }, "New secret");
  rotate.addEventListener("click", () => rotateSecret(endpoint));
  const remove = el("button", { type: "button", class: "small danger" }, "Delete");
  remove.addEventListener("click", () => deleteEndpoint(endpoint));
  return el(
    "tr",
    { data: { endpoint: endpoint.id } },
    cell("URL", el("span", { class: "mono url" }, endpoint.url)),
    cell("Events", listed(endpoint.event_types)),
    cell("Licenses", listed(endpoint.license_ids)),
    cell("State", endpointState(endpoint)),
    cell("Created", when(endpoint.created_at)),
    cell("", test, " ", rotate, " ", remove),
  );
}

function attemptRow(attempt, urls) {
  const cell = (label, ...content) => el("td", { data: { label } }, ...content);
  return el(
    "tr",
    { data: { event: attempt.event_id ?? "" } },
    cell("Time", when(attempt.at)),
    cell("Endpoint", el("span", { class: "mono" }, urls[attempt.endpoint_id] ?? attempt.endpoint_id ?? "")),
    cell("Event", attempt.type ?? ""),
    cell("State", attempt.state ?? ""),
    cell("Status", attempt.status == null ? "-" : String(attempt.status)),
    cell("Latency", attempt.latency_ms == null ? "-" : `${attempt.latency_ms} ms`),
    cell("Error", el("span", { class: "mono" }, attempt.error ?? "")),
  );
}

async function loadWebhooks() {
  const [listing, recent] = await Promise.all([call("webhook_list"), call("webhook_deliveries", { limit: 50 })]);
  const rows = listing.endpoints.map(endpointRow);
  if (rows.length === 0) rows.push(el("tr", {}, el("td", { colspan: "6" }, "No endpoint yet.")));
  $("webhooks").tBodies[0].replaceChildren(...rows);
  const urls = Object.fromEntries(listing.endpoints.map((e) => [e.id, e.url]));
  const attempts = recent.attempts.map((a) => attemptRow(a, urls));
  if (attempts.length === 0) attempts.push(el("tr", {}, el("td", { colspan: "7" }, "No delivery yet.")));
  $("webhook-deliveries").tBodies[0].replaceChildren(...attempts);
}

function showSecret(secret) {
  $("new-webhook-secret-value").textContent = secret;
  $("new-webhook-secret").hidden = false;
}

async function sendTest(endpoint) {
  await guarded(async () => {
    const sent = await call("webhook_test", { endpoint_id: endpoint.id });
    const last = sent.attempts.length ? sent.attempts[sent.attempts.length - 1] : null;
    const outcome = !last ? "not tried yet" : last.status != null ? `HTTP ${last.status}` : last.error;
    notice(`Sent a test event to ${endpoint.url}: ${outcome} (${sent.state}).`, sent.state !== "delivered");
    await loadWebhooks();
  });
}

async function rotateSecret(endpoint) {
  const yes = await confirmAction(
    `Make a new secret for ${endpoint.url}? The old one keeps signing beside it for 24 hours.`,
    "Make a new secret",
  );
  if (!yes) return;
  await guarded(async () => {
    const made = await call("webhook_rotate_secret", { endpoint_id: endpoint.id });
    showSecret(made.secret);
    notice(`New secret for ${endpoint.url}.`);
  });
}

async function deleteEndpoint(endpoint) {
  const yes = await confirmAction(`Delete the endpoint ${endpoint.url}? Nothing more is sent to it.`, "Delete");
  if (!yes) return;
  await guarded(async () => {
    await call("webhook_delete", { endpoint_id: endpoint.id });
    notice(`Deleted the endpoint ${endpoint.url}.`);
    await loadWebhooks();
  });
}

// -- signing in and out -----------------------------------------------------------------

function signOut(message = "") {
  sessionStorage.removeItem(KEY);
  clearInterval(timer);
  $("app").hidden = true;
  $("sign-out").hidden = true;
  $("sign-in").hidden = false;
  $("tenant").textContent = "";
  $("new-key").hidden = true;
  $("new-key-value").textContent = "";
  $("new-webhook-secret").hidden = true;
  $("new-webhook-secret-value").textContent = "";
  notice(message, Boolean(message));
}

async function start() {
  $("sign-in").hidden = true;
  $("app").hidden = false;
  $("sign-out").hidden = false;
  notice("");
  await guarded(async () => {
    await loadStatus();
    await Promise.all([loadUsage(), loadKeys(), loadWebhooks()]);
  });
  clearInterval(timer);
  timer = setInterval(() => {
    if (sessionStorage.getItem(KEY) && document.visibilityState === "visible") guarded(loadStatus);
  }, REFRESH_MS);
}

$("sign-in-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const key = $("key").value.trim();
  $("key").value = "";
  if (!key) return;
  sessionStorage.setItem(KEY, key);
  start();
});

$("sign-out").addEventListener("click", () => signOut());
$("refresh").addEventListener("click", () => guarded(loadStatus));
$("webhooks-refresh").addEventListener("click", () => guarded(loadWebhooks));

for (const button of document.querySelectorAll("[data-days]")) {
  button.addEventListener("click", () => {
    usageDays = Number(button.dataset.days);
    for (const b of document.querySelectorAll("[data-days]")) {
      b.setAttribute("aria-pressed", String(b === button));
    }
    guarded(loadUsage);
  });
}

$("new-key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  guarded(async () => {
    const made = await call("keys.create", { label: $("new-key-label").value.trim() });
    $("new-key-label").value = "";
    $("new-key-value").textContent = made.key;
    $("new-key").hidden = false;
    await loadKeys();
  });
});

$("new-webhook-form").addEventListener("submit", (event) => {
  event.preventDefault();
  guarded(async () => {
    const types = $("new-webhook-events").value.split(",").map((t) => t.trim()).filter(Boolean);
    const made = await call("webhook_create", { url: $("new-webhook-url").value.trim(), event_types: types });
    $("new-webhook-url").value = "";
    $("new-webhook-events").value = "";
    showSecret(made.secret);
    await loadWebhooks();
  });
});

// A link may carry the key in its fragment (never sent to a server): keep it in this tab
// only, and take it out of the address bar and the history at once.
if (location.hash.startsWith("#key=")) {
  sessionStorage.setItem(KEY, decodeURIComponent(location.hash.slice(5)));
  history.replaceState(null, "", location.pathname + location.search);
}
if (sessionStorage.getItem(KEY)) start();
