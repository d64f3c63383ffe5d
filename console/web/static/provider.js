// oGPU console, provider page: the earnings and speed charts (uPlot,
// when the binary embeds it), the earnings figures refreshed on new
// blocks, and the agent's forms sent with fetch. Values go into the page
// as text only.

const page = document.getElementById("provider");
let earnChart = null;
let busy = false;

function chartWidth(el) {
  return Math.max(320, el.clientWidth - 36);
}

function oGPU(v) {
  return v == null ? "" : v.toLocaleString(undefined, { maximumFractionDigits: 6 }) + " oGPU";
}

function drawEarnings(series) {
  const el = document.getElementById("earn-chart");
  if (!el || typeof uPlot === "undefined") return;
  if (earnChart) {
    earnChart.setData(series);
    return;
  }
  el.textContent = "";
  earnChart = new uPlot({
    width: chartWidth(el),
    height: 240,
    title: "Cumulative earnings",
    scales: { x: { time: true } },
    series: [{}, {
      label: "earned", stroke: "#4f46e5", fill: "rgba(79,70,229,0.12)", width: 2, value: (u, v) => oGPU(v),
      paths: uPlot.paths && uPlot.paths.stepped ? uPlot.paths.stepped({ align: 1 }) : undefined,
    }],
  }, series, el);
}

function drawSpeeds() {
  const el = document.getElementById("speed-chart");
  if (!el || typeof uPlot === "undefined") return;
  let series;
  try {
    series = JSON.parse(el.dataset.series || "[[],[]]");
  } catch {
    return;
  }
  if (!series[0] || series[0].length === 0) {
    el.textContent = "No generation measured yet.";
    return;
  }
  new uPlot({
    width: chartWidth(el),
    height: 200,
    title: "Tokens per second",
    scales: { x: { time: true } },
    series: [{}, { label: "tokens/s", stroke: "#059669", width: 2, points: { show: true } }],
  }, series, el);
}

// refresh reads the earnings JSON and updates the figures, the per-job
// paid cells and the chart.
async function refresh() {
  if (busy) return;
  busy = true;
  try {
    const r = await fetch("/api/providers/" + encodeURIComponent(page.dataset.addr) + "/earnings", { credentials: "same-origin" });
    if (!r.ok) return;
    const e = await r.json();
    const day = document.getElementById("earn-day");
    const total = document.getElementById("earn-total");
    if (day) day.textContent = e.day;
    if (total) total.textContent = e.total;
    for (const j of e.per_job) {
      for (const td of document.querySelectorAll(`td.paid[data-job="${CSS.escape(String(j.job))}"]`)) td.textContent = j.paid;
    }
    if (e.series[0].length > 0) drawEarnings(e.series);
    else {
      const el = document.getElementById("earn-chart");
      if (el && !earnChart) el.textContent = "No payment yet: the chart starts at the first one.";
    }
  } finally {
    busy = false;
  }
}

function flash(text, ok) {
  const el = document.getElementById("flash");
  if (!el) return;
  el.textContent = text;
  el.classList.remove("hidden", "good", "error");
  el.classList.add(ok ? "good" : "error");
}

// Forms go through fetch: the answer shows in the flash line; a success
// reloads the page with it (the stake and price shown are the chain's).
function wireForms() {
  for (const form of document.querySelectorAll("form.action")) {
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const btn = form.querySelector("button");
      if (btn) btn.disabled = true;
      try {
        const r = await fetch(form.action, {
          method: "POST",
          body: new URLSearchParams(new FormData(form)),
          credentials: "same-origin",
          headers: { Accept: "text/plain" },
        });
        const text = (await r.text()).trim();
        if (r.ok) {
          location.href = location.pathname + "?done=" + encodeURIComponent(text);
        } else {
          flash(text || "refused: " + r.status, false);
        }
      } catch (err) {
        flash("the console cannot be reached: " + err, false);
      } finally {
        if (btn) btn.disabled = false;
      }
    });
  }
}

if (page) {
  wireForms();
  drawSpeeds();
  refresh();
  // Each new block may carry a payment: refresh (one read at a time; the
  // console caches what it read of older blocks).
  document.addEventListener("ogpu:block", () => refresh());
}
