// oGPU console: live updates over server-sent events, and the token
// exchange (#token=… in the URL becomes an HttpOnly cookie). No framework;
// every value is put into the page as text, never as HTML.

async function exchangeToken() {
  const m = location.hash.match(/token=([0-9a-fA-F]+)/);
  if (!m) return;
  history.replaceState(null, "", location.pathname + location.search);
  const body = new URLSearchParams({ token: m[1] });
  const r = await fetch("/api/session", { method: "POST", body, credentials: "same-origin" });
  document.documentElement.dataset.token = r.ok ? "accepted" : "refused";
}

function cell(tr, text, cls) {
  const td = document.createElement("td");
  if (cls) td.className = cls;
  td.textContent = text;
  tr.appendChild(td);
  return td;
}

function onJob(e) {
  const d = JSON.parse(e.data);
  const body = document.querySelector("#timeline tbody");
  if (!body) return;
  const tr = document.createElement("tr");
  tr.className = "new";
  const a = document.createElement("a");
  a.href = "/blocks/" + d.height;
  a.textContent = String(d.height);
  cell(tr, "").appendChild(a);
  cell(tr, d.time);
  const tag = document.createElement("span");
  tag.className = "tag";
  tag.textContent = d.step;
  cell(tr, "").appendChild(tag);
  cell(tr, d.type);
  cell(tr, d.detail, "mono small wrap");
  body.appendChild(tr);
  const li = document.querySelector(`#steps li[data-step="${CSS.escape(d.step)}"]`);
  if (li && !li.classList.contains("done")) {
    li.classList.add("done");
    li.querySelector(".when").textContent = "#" + d.height;
  }
  refreshJob();
}

// refreshJob reads the job's state, phase and escrow after one of its events.
async function refreshJob() {
  const job = document.getElementById("job");
  if (!job) return;
  const r = await fetch("/api/jobs/" + encodeURIComponent(job.dataset.job), { credentials: "same-origin" });
  if (!r.ok) return;
  const j = await r.json();
  for (const [id, v] of [["job-state", j.state], ["job-phase", j.phase], ["job-locked", j.locked]]) {
    const el = document.getElementById(id);
    if (el) el.textContent = v;
  }
  // Past its bidding window a job can no longer be cancelled, and who
  // could bid is history.
  if (j.state !== "bidding") {
    for (const id of ["cancel-job", "who-can-bid"]) document.getElementById(id)?.remove();
  }
}

// onBlock prepends a new block to the first page of the block list.
function onBlock(d) {
  const table = document.getElementById("blocks");
  if (!table || table.dataset.live === undefined) return;
  const body = table.querySelector("tbody");
  const first = body.querySelector("tr td a");
  if (first && Number(first.textContent) >= d.height) return;
  const tr = document.createElement("tr");
  tr.className = "new";
  const a = document.createElement("a");
  a.href = "/blocks/" + d.height;
  a.textContent = String(d.height);
  cell(tr, "").appendChild(a);
  cell(tr, d.time);
  cell(tr, d.txs < 0 ? "?" : String(d.txs), "num");
  cell(tr, d.hash, "mono dim");
  body.insertBefore(tr, body.firstChild);
  while (body.rows.length > 20) body.deleteRow(body.rows.length - 1);
}

function live() {
  const job = document.getElementById("job");
  const url = "/api/events" + (job ? "?job=" + encodeURIComponent(job.dataset.job) : "");
  const es = new EventSource(url);
  const dot = document.getElementById("live");
  es.addEventListener("open", () => dot && dot.classList.add("on"));
  es.addEventListener("error", () => dot && dot.classList.remove("on"));
  es.addEventListener("block", (e) => {
    const d = JSON.parse(e.data);
    const h = document.getElementById("live-height");
    if (h) h.textContent = "#" + d.height;
    const latest = document.getElementById("latest");
    if (latest) latest.textContent = String(d.height);
    onBlock(d);
    document.dispatchEvent(new CustomEvent("ogpu:block", { detail: d }));
  });
  es.addEventListener("job", onJob);
  es.addEventListener("text", (e) => {
    const out = document.getElementById("output");
    if (out) out.textContent += JSON.parse(e.data).text;
  });
}

exchangeToken();
live();
// The provider page's charts, figures and forms.
if (document.getElementById("provider")) import("/static/provider.js");
