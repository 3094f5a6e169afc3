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

function when(iso, relative = true) {
  if (!iso) return "";
  const text = relative ? ago(iso) : new Date(iso).toLocaleString();
  return el("time", { datetime: iso, title: new Date(iso).toLocaleString() }, text);
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

function leaseRow(license, lease) {
  const free = el("button", { type: "button", class: "small danger" }, "Free seat");
  free.addEventListener("click", () => freeSeat(license, lease));
  const cell = (label, ...content) => el("td", { data: { label } }, ...content);
  return el(
    "tr",
    { data: { session: lease.session_id } },
    cell("Client", el("span", { class: "mono client" }, lease.client_id ?? "")),
    cell("User", el("span", { class: "user" }, lease.user ?? "")),
    cell("Host", el("span", { class: "host" }, lease.host ?? "")),
    cell("Since", when(lease.acquired_at)),
    cell("Expires", when(lease.expires_at, false)),
    cell("Borrowed", lease.borrowed ? "borrowed" : lease.lingering ? "lingering" : "no"),
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
  // The term (issue 30): when it ends, a banner in the grace or after the end, and what it entitles to.
  if (state !== "perpetual" || (license.entitlements ?? []).length > 0) {
    const facts = [license.term_text];
    if ((license.entitlements ?? []).length > 0) facts.push(`entitlements: ${license.entitlements.join(", ")}`);
    if (license.max_version) facts.push(`versions up to ${license.max_version}`);
    block.append(el("p", { class: "muted term" }, facts.join(" · ")));
  }
  if (state === "in_grace") {
    block.append(el("p", { class: "banner warn grace", role: "status" }, `This license expired on ${license.expires_at.slice(0, 10)} and works until ${license.grace_ends_at.slice(0, 10)} (its grace). Renew it with your vendor to keep your seats.`));
  } else if (state === "expired") {
    block.append(el("p", { class: "banner warn expired", role: "status" }, `This license expired on ${license.expires_at.slice(0, 10)}: no new seat is granted. Renew it with your vendor.`));
  }
  if (license.leases.length === 0) {
    block.append(el("p", { class: "muted" }, "No seat is taken."));
  } else {
    const head = ["Client", "User", "Host", "Since", "Expires", "Borrowed", "Details", ""];
    block.append(
      el(
        "div",
        { class: "scroll" },
        el(
          "table",
          { class: "cards" },
          el("thead", {}, el("tr", {}, ...head.map((h) => el("th", {}, h)))),
          el("tbody", {}, ...license.leases.map((lease) => leaseRow(license, lease))),
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
        ...license.queue.map((t) => el("li", {}, [t.client_id, t.user].filter(Boolean).join(" · "))),
      ),
    );
  }
  return block;
}

async function loadStatus() {
  const body = await call("status");
  $("tenant").textContent = body.tenant_id ? `Organisation ${body.tenant_id}` : "";
  $("as-of").textContent = `As of ${new Date(body.at).toLocaleTimeString()}`;
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

// -- usage chart ------------------------------------------------------------------------

function drawChart(body) {
  const width = 640;
  const height = 220;
  const pad = { left: 36, right: 12, top: 12, bottom: 28 };
  const since = Date.parse(body.since);
  const until = Date.parse(body.until);
  const lines = body.timelines || [];
  let top = 1;
  for (const line of lines) {
    top = Math.max(top, line.seats ?? 0, line.start_level ?? 0);
    for (const [, used, total] of line.points) top = Math.max(top, used ?? 0, total ?? 0);
  }
  const x = (t) => pad.left + ((t - since) / (until - since)) * (width - pad.left - pad.right);
  const y = (v) => height - pad.bottom - (v / top) * (height - pad.top - pad.bottom);
  const chart = svg("svg", {
    viewBox: `0 0 ${width} ${height}`,
    role: "img",
    "aria-labelledby": "chart-title",
  });
  chart.append(svg("title", { id: "chart-title" }, `Peak seats in use, last ${body.days} days`));
  for (const v of [0, Math.ceil(top / 2), top]) {
    chart.append(svg("line", { class: "grid", x1: pad.left, x2: width - pad.right, y1: y(v), y2: y(v) }));
    chart.append(svg("text", { x: pad.left - 6, y: y(v) + 4, "text-anchor": "end" }, String(v)));
  }
  chart.append(svg("line", { class: "axis", x1: pad.left, x2: width - pad.right, y1: y(0), y2: y(0) }));
  const fmt = (t) => new Date(t).toLocaleDateString(undefined, { month: "short", day: "numeric" });
  chart.append(svg("text", { x: pad.left, y: height - 8 }, fmt(since)));
  chart.append(svg("text", { x: width - pad.right, y: height - 8, "text-anchor": "end" }, fmt(until)));
  const legend = [];
  lines.forEach((line, i) => {
    const colour = `c${i % 6}`;
    // A step line: each period holds its peak from its start to the next period's.
    let level = line.start_level ?? 0;
    const steps = [[since, level]];
    for (const [start, used] of line.points) {
      const t = Date.parse(start);
      steps.push([t, level]);
      level = used ?? level;
      steps.push([t, level]);
    }
    steps.push([until, level]);
    const points = steps.map(([t, v]) => `${x(t).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    chart.append(svg("polyline", { class: `used ${colour}`, points }));
    if (line.seats != null) {
      chart.append(
        svg("line", {
          class: `total ${colour}`,
          x1: pad.left,
          x2: width - pad.right,
          y1: y(line.seats),
          y2: y(line.seats),
        }),
      );
    }
    legend.push(el("li", { class: colour }, `${line.license_id} (${line.seats ?? "?"} seats)`));
  });
  if (lines.length === 0) {
    chart.append(svg("text", { x: width / 2, y: height / 2, "text-anchor": "middle" }, "No usage recorded."));
  }
  $("chart").replaceChildren(chart);
  $("legend").replaceChildren(...legend);
  $("usage-period").textContent = body.period;
}

async function loadUsage() {
  drawChart(await call("usage", { days: usageDays }));
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
    cell("Created", when(key.created_at, false)),
    cell("State", key.active ? "active" : "revoked"),
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
  notice(message, Boolean(message));
}

async function start() {
  $("sign-in").hidden = true;
  $("app").hidden = false;
  $("sign-out").hidden = false;
  notice("");
  await guarded(async () => {
    await loadStatus();
    await Promise.all([loadUsage(), loadKeys()]);
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

// A link may carry the key in its fragment (never sent to a server): keep it in this tab
// only, and take it out of the address bar and the history at once.
if (location.hash.startsWith("#key=")) {
  sessionStorage.setItem(KEY, decodeURIComponent(location.hash.slice(5)));
  history.replaceState(null, "", location.pathname + location.search);
}
if (sessionStorage.getItem(KEY)) start();
