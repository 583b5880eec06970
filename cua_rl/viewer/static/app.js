// cua-rl trajectory viewer: plain JS over the /api/ endpoints, polling for live runs.
"use strict";

const POLL_MS = 3000;
const PAGE = 50;
const $ = (id) => document.getElementById(id);

const state = {
  filters: { task: "", outcome: "", version: "", aborted: "include" },
  cursors: [null],          // cursor of each page visited; the last one is shown
  page: { items: [], total: 0, next_cursor: null },
  sel: -1,                  // index of the selected trajectory in page.items
  traj: null,               // detail of the selected trajectory
  step: 0,
  wanted: null,             // id of the trajectory last asked for
  tasksOffset: 0,
  search: "",               // text search over task id, instruction and domain
  group: null,              // group shown side by side (its id), or null
  historyOffset: 0,
  seen: {},                 // last JSON text per endpoint: re-render only on change
};

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children) if (c != null) node.append(c);
  return node;
}

const pct = (x) => (x == null ? "–" : `${(100 * x).toFixed(0)}%`);
const num = (x, d = 2) => (x == null ? "–" : Number(x).toFixed(d));
const shotUrl = (name) => `/screenshots/${encodeURIComponent(name)}`;

async function getJSON(url, key) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: ${r.status} ${await r.text()}`);
  const text = await r.text();
  const changed = state.seen[key] !== text;
  state.seen[key] = text;
  return { data: JSON.parse(text), changed };
}

function outcomeBadge(t) {
  if (t.status === "aborted") return el("span", { class: "abort", title: "aborted" }, "⊘");
  if (t.status === "setup_failed") {
    return el("span", { class: "abort", title: `setup failed${t.error ? ": " + t.error : ""}` }, "⚠");
  }
  return t.outcome === 1
    ? el("span", { class: "ok", title: "success" }, "✓")
    : el("span", { class: "fail", title: "failure" }, "✗");
}

// overview and tasks --------------------------------------------------------------

async function loadOverview() {
  const { data, changed } = await getJSON("/api/overview", "overview");
  if (!changed) return;
  const runs = data.runs.map((r) =>
    `${r.run_id}: ${r.trajectories} trajectories, success ${pct(r.success_rate)}, ` +
    `${r.aborted} aborted, ${r.steps} steps`);
  const c = data.counters;
  const extra = ["policy_updates", "prm_updates", "weight_syncs", "adapt_accepted"]
    .filter((k) => c[k] != null).map((k) => `${k} ${c[k]}`);
  $("run-line").textContent = [...runs, ...extra].join(" · ");
  const sel = $("f-version");
  const keep = sel.value;
  sel.replaceChildren(el("option", { value: "" }, "any"),
    ...data.policy_versions.map((v) => el("option", { value: String(v) }, `v${v}`)));
  sel.value = keep;
}

async function loadTasks() {
  const q = new URLSearchParams({ offset: String(state.tasksOffset), limit: String(PAGE) });
  if (state.search) q.set("q", state.search);
  const { data, changed } = await getJSON(`/api/tasks?${q}`, "tasks");
  if (!changed) return;
  $("tasks").tBodies[0].replaceChildren(...data.items.map((t) => el("tr", {
    class: t.task_id === state.filters.task ? "sel" : "", "data-task": t.task_id,
    title: `${t.task_id} (${t.domain || "no domain"})\n${t.instruction}`,
    onclick: () => setFilter("task", t.task_id === state.filters.task ? "" : t.task_id),
  }, el("td", {}, el("span", { class: "tid" }, t.task_id),
    t.domain ? el("span", { class: "domain" }, t.domain) : null,
    el("span", { class: "instr-cell" }, t.instruction)),
  el("td", {}, String(t.trajectories)),
  el("td", {}, pct(t.success_rate)), el("td", {}, String(t.aborted)))));
  if (!data.items.length) {
    $("tasks").tBodies[0].append(el("tr", {}, el("td", { colspan: "4", class: "meta" },
      state.search ? `no task matches "${state.search}"` : "no tasks yet")));
  }
  const label = state.search ? `${data.total} tasks matching` : `${data.total} tasks`;
  pager($("tasks-pager"), state.tasksOffset > 0, state.tasksOffset + PAGE < data.total,
    label, (dir) => { state.tasksOffset = Math.max(0, state.tasksOffset + dir * PAGE);
      loadTasks(); });
}

function pager(node, hasPrev, hasNext, label, go) {
  node.replaceChildren(
    el("button", hasPrev ? { onclick: () => go(-1) } : { disabled: "" }, "‹"),
    el("span", {}, label),
    el("button", hasNext ? { onclick: () => go(1) } : { disabled: "" }, "›"));
}

async function loadTaskPanel() {
  const task = state.filters.task;
  $("task-panel").hidden = !task;
  if (!task) return;
  const enc = encodeURIComponent(task);
  const [{ data: v }, { data: h }] = await Promise.all([
    getJSON(`/api/tasks/${enc}`, "task"),
    getJSON(`/api/tasks/${enc}/history?offset=${state.historyOffset}&limit=20`, "history")]);
  $("task-title").textContent = `Task ${task}`;
  $("variants").tBodies[0].replaceChildren(...v.variants.map((x) => el("tr", {},
    el("td", {}, x.variant_id), el("td", {}, x.instruction),
    el("td", {}, String(x.trajectories)), el("td", {}, pct(x.success_rate)))));
  $("history").replaceChildren(...h.items.map(historyItem));
  if (!h.items.length) $("history").append(el("li", {}, "no adaptation yet"));
  pager($("history-pager"), state.historyOffset > 0, state.historyOffset + 20 < h.total,
    `${h.total} events`, (dir) => { state.historyOffset = Math.max(0, state.historyOffset + dir * 20);
      loadTaskPanel(); });
}

function historyItem(e) {
  const when = new Date(e.created_at * 1000).toLocaleString();
  const head = el("div", {}, `${when} · ${e.kind} · ${e.direction ?? ""} `);
  if (e.kind === "adapt_decision") {
    head.append(el("span", { class: e.accepted ? "accepted" : "rejected" },
      e.accepted ? "accepted" : "rejected"));
  }
  const acc = e.kind === "adapt_decision"
    ? `${e.parent} (acc ${num(e.acc_parent)}) → ${e.candidate} (acc ${num(e.acc_candidate)})`
    : `${e.candidate ?? ""} from acc ${num(e.acc_parent ?? e.acc)}`;
  const item = el("li", {}, head, el("div", {}, acc));
  if (e.instruction) item.append(el("div", {}, `instruction: ${e.instruction}`));
  for (const s of e.summaries || []) item.append(el("pre", {}, s));
  return item;
}

// trajectory list -------------------------------------------------------------------

function listQuery() {
  const q = new URLSearchParams({ limit: String(PAGE) });
  const f = state.filters;
  if (f.task) q.set("task", f.task);
  if (f.outcome) q.set("outcome", f.outcome);
  if (f.version) q.set("version", f.version);
  q.set("aborted", f.aborted);
  const cursor = state.cursors[state.cursors.length - 1];
  if (cursor) q.set("cursor", cursor);
  return `/api/trajectories?${q}`;
}

async function loadList() {
  const { data, changed } = await getJSON(listQuery(), "list");
  if (!changed) return;
  const selId = state.traj?.trajectory_id;
  state.page = data;
  state.sel = data.items.findIndex((t) => t.trajectory_id === selId);
  renderList();
}

function renderList() {
  const items = state.page.items;
  $("trajs").replaceChildren(...items.map((t, i) => el("li", {
    class: i === state.sel ? "sel" : "", "data-id": t.trajectory_id, onclick: () => select(i),
  }, outcomeBadge(t), el("div", {}, el("div", {}, t.task_id),
    el("div", { class: "meta" }, `${t.variant_id} · ${t.trajectory_id}`)),
  el("div", { class: "meta" }, `${t.n_steps} st · v${t.policy_version_at_start}`))));
  const pageNo = state.cursors.length;
  pager($("traj-pager"), pageNo > 1, state.page.next_cursor != null,
    `page ${pageNo} · ${state.page.total} trajectories`, (dir) => turnPage(dir));
  $("trajs").querySelector("li.sel")?.scrollIntoView({ block: "nearest" });
}

async function turnPage(dir, selectAt = null) {
  if (dir > 0 && state.page.next_cursor == null) return false;
  if (dir < 0 && state.cursors.length < 2) return false;
  if (dir > 0) state.cursors.push(state.page.next_cursor);
  else state.cursors.pop();
  await loadList();
  if (selectAt === "first") await select(0);
  if (selectAt === "last") await select(state.page.items.length - 1);
  return true;
}

function setFilter(name, value) {
  state.filters[name] = value;
  if (name === "task") { $("f-task").value = value; state.historyOffset = 0; }
  state.cursors = [null];
  state.seen.list = state.seen.tasks = null;
  loadList(); loadTasks(); loadTaskPanel();
}

// one trajectory ----------------------------------------------------------------------

async function select(i) {
  const t = state.page.items[i];
  if (!t) return;
  state.sel = i;
  renderList();
  await openTrajectory(t.trajectory_id, 0);
}

async function openTrajectory(id, step) {
  state.wanted = id;  // quick key presses: only the last trajectory asked for is shown
  const { data } = await getJSON(`/api/trajectories/${encodeURIComponent(id)}`, "traj");
  if (state.wanted !== id) return;
  state.traj = data;
  state.step = Math.min(step, Math.max(0, data.steps.length - 1));
  renderTrajectory();
}

async function refreshTrajectory() {
  if (!state.traj) return;
  const id = state.traj.trajectory_id;
  const { data, changed } = await getJSON(`/api/trajectories/${encodeURIComponent(id)}`, "traj");
  if (!changed || state.wanted !== id) return;
  state.traj = data;
  renderTrajectory();
}

const isUnscored = (t) => t.status === "aborted" || t.status === "setup_failed";

function renderTrajectory() {
  const t = state.traj;
  $("traj-panel").hidden = false;
  $("empty").hidden = true;
  const outcome = isUnscored(t)
    ? el("span", { class: "abort" }, t.status.replace("_", " "))
    : el("span", { class: t.outcome === 1 ? "ok" : "fail" },
      `${t.outcome === 1 ? "success" : "failure"} (O = ${t.outcome > 0 ? "+1" : "-1"}, score ${num(t.score)})`);
  $("traj-head").replaceChildren(
    el("div", { class: "title" }, `${t.task_id} · ${t.variant_id} · `, outcome),
    el("div", { class: "instr" }, t.instruction ?? ""),
    el("div", { class: "meta" }, `${t.trajectory_id} · group ${t.group_id || "–"} · ` +
      `status ${t.status} · ${t.n_steps} steps · policy v${t.policy_version_at_start} · ` +
      `screen ${t.screen_w}×${t.screen_h} · λ ${t.lambda}`),
    t.group_id ? el("button", { class: "link", id: "open-group",
      onclick: () => openGroup(t.group_id) }, `group ${t.group_id} side by side`) : null);
  const video = $("recording");
  if (t.recording) {
    if (video.getAttribute("src") !== t.recording) video.setAttribute("src", t.recording);
    video.hidden = false;
  } else {
    video.removeAttribute("src");
    video.hidden = true;
  }
  // A trajectory without steps (setup failed, aborted before its first step) has
  // no screenshot to show: say what happened instead of a broken image.
  const noSteps = !t.steps.length;
  $("no-steps").hidden = !noSteps;
  $("step-view").hidden = noSteps;
  $("filmstrip").hidden = noSteps;
  if (noSteps) {
    const why = t.status === "setup_failed" ? "The task's setup failed; the agent never ran."
      : t.status === "aborted" ? "The episode was aborted before its first step."
        : "The episode ended before its first step.";
    $("no-steps").replaceChildren(
      el("strong", {}, `${t.status.replace("_", " ")} · no steps recorded`),
      el("div", {}, why),
      t.error ? el("div", { class: "reason" }, `reason: ${t.error}`)
        : el("div", { class: "meta" }, "no reason was stored"));
    history.replaceState(null, "", `#traj=${encodeURIComponent(t.trajectory_id)}&step=0`);
    return;
  }
  if (isUnscored(t) && t.error) {
    $("traj-head").append(el("div", { class: "perr" }, `reason: ${t.error}`));
  }
  $("filmstrip").replaceChildren(...t.steps.map((s, i) => el("figure", {
    class: i === state.step ? "sel" : "", onclick: () => showStep(i),
  }, el("img", { src: shotUrl(s.screenshot_before), loading: "lazy", alt: `step ${s.index}` }),
  el("figcaption", {}, el("span", {}, `#${s.index}`),
    el("span", { class: s.mean_vote > 0 ? "ok" : s.mean_vote < 0 ? "fail" : "" },
      s.mean_vote == null ? "" : `S̄ ${num(s.mean_vote)}`)))));
  renderStep();
}

function showStep(i) {
  if (!state.traj || i < 0 || i >= state.traj.steps.length) return;
  state.step = i;
  [...$("filmstrip").children].forEach((f, j) => f.classList.toggle("sel", j === i));
  $("filmstrip").children[i]?.scrollIntoView({ block: "nearest", inline: "nearest" });
  renderStep();
}

function renderStep() {
  const t = state.traj;
  const s = t.steps[state.step];
  history.replaceState(null, "", `#traj=${encodeURIComponent(t.trajectory_id)}&step=${state.step}`);
  if (!s) {
    $("shot").removeAttribute("src");
    $("overlay").replaceChildren();
    $("step-info").replaceChildren(el("p", {}, "no steps recorded"));
    return;
  }
  $("shot").src = shotUrl(s.screenshot_before);
  drawActions($("overlay"), s.actions, t.screen_w, t.screen_h);
  const info = [
    el("h3", {}, `Step #${s.index} (${state.step + 1} of ${t.steps.length})`),
    el("div", { class: "numbers" },
      el("span", { id: "reward" }, `R = ${num(s.reward)}`),
      el("span", { id: "advantage" }, `A = ${num(s.advantage)}`),
      el("span", {}, `mean vote ${num(s.mean_vote)}`),
      el("span", {}, `policy v${s.policy_version}`),
      el("span", {}, `policy ${num(s.timings.policy_s)} s · act ${num(s.timings.act_s)} s`)),
    el("h3", {}, "Actions"),
    el("pre", { id: "actions" }, s.actions.map(actionLabel).join("\n") || "(none)"),
  ];
  if (s.parse_error) {
    info.push(el("div", { class: "perr" }, `parse error ${s.parse_error.code}: ${s.parse_error.message}`));
  }
  info.push(el("h3", {}, "Response"), el("pre", { id: "response" }, s.response));
  if (s.code) info.push(el("h3", {}, "Code"), el("pre", {}, s.code));
  info.push(el("h3", {}, `PRM votes (${s.votes.length})`));
  const votes = el("div", { id: "votes" });
  for (const v of s.votes) {
    const label = v.score === 1 ? "+1 good" : v.score === -1 ? "-1 bad" : "0 unparseable";
    votes.append(el("div", { class: "vote", "data-score": String(v.score) },
      el("div", { class: "score" }, `${label} · PRM v${v.prm_version}`), el("pre", {}, v.text)));
  }
  if (!s.votes.length) votes.append(el("div", { class: "meta" }, "no votes yet"));
  info.push(votes);
  if (s.screenshot_after) {
    info.push(el("h3", {}, "After"),
      el("img", { class: "after", src: shotUrl(s.screenshot_after), alt: "screenshot after" }));
  }
  $("step-info").replaceChildren(...info);
}

// a group side by side ----------------------------------------------------------------

async function openGroup(gid) {
  const { data } = await getJSON(`/api/groups/${encodeURIComponent(gid)}`, "group");
  state.group = gid;
  renderGroup(data);
  $("group-panel").scrollIntoView({ block: "start" });
}

function renderGroup(g) {
  $("group-panel").hidden = false;
  const rows = Math.max(1, ...g.members.map((m) => m.steps.length));
  $("group-head").replaceChildren(
    el("h2", {}, `Group ${g.group_id} · ${g.task_id} · ${g.members.length} rollouts`,
      g.members_truncated ? " (first ones only)" : ""),
    el("div", { class: "instr" }, g.instruction ?? ""),
    el("button", { class: "link", onclick: () => { state.group = null; $("group-panel").hidden = true; } },
      "close"));
  const grid = $("group-grid");
  grid.style.gridTemplateColumns = `repeat(${g.members.length}, minmax(160px, 1fr))`;
  const cells = g.members.map((m) => {
    const head = el("div", {
      class: "col-head" + (m.trajectory_id === state.traj?.trajectory_id ? " current" : ""),
      "data-id": m.trajectory_id,
    }, outcomeBadge(m), ` ${m.trajectory_id} · ${m.n_steps} st`,
    isUnscored(m) ? el("div", { class: "perr" }, `${m.status.replace("_", " ")}` +
      (m.error ? `: ${m.error}` : "")) : el("div", { class: "meta" }, `score ${num(m.score)}`));
    return head;
  });
  grid.replaceChildren(...cells);
  // Row-major so step i of every rollout lines up across the columns.
  for (let i = 0; i < rows; i++) {
    for (const m of g.members) {
      const s = m.steps[i];
      grid.append(s
        ? el("figure", { onclick: () => openTrajectory(m.trajectory_id, i) },
          el("img", { src: shotUrl(s.screenshot_before), loading: "lazy",
            alt: `${m.trajectory_id} step ${s.index}` }),
          el("figcaption", {}, `#${s.index}`))
        : el("div", { class: "gap" }, i === 0 ? "no steps" : ""));
    }
  }
}

// keyboard, filters, polling ------------------------------------------------------------

async function moveTrajectory(dir) {
  const next = state.sel + dir;
  if (next >= 0 && next < state.page.items.length) return select(next);
  if (state.sel < 0 && dir > 0 && state.page.items.length) return select(0);
  await turnPage(dir, dir > 0 ? "first" : "last");
}

document.addEventListener("keydown", (ev) => {
  if (/^(INPUT|SELECT|TEXTAREA)$/.test(ev.target.tagName)) return;
  const moves = { ArrowLeft: () => showStep(state.step - 1), ArrowRight: () => showStep(state.step + 1),
    ArrowUp: () => moveTrajectory(-1), ArrowDown: () => moveTrajectory(1) };
  if (moves[ev.key]) { ev.preventDefault(); moves[ev.key](); }
});

let searchTimer = null;
$("f-search").addEventListener("input", (e) => {
  clearTimeout(searchTimer);  // one request after typing pauses, not one per key
  searchTimer = setTimeout(() => {
    state.search = e.target.value.trim();
    state.tasksOffset = 0;
    state.seen.tasks = null;
    loadTasks();
  }, 250);
});
$("f-task").addEventListener("change", (e) => setFilter("task", e.target.value.trim()));
$("f-outcome").addEventListener("change", (e) => setFilter("outcome", e.target.value));
$("f-version").addEventListener("change", (e) => setFilter("version", e.target.value));
$("f-aborted").addEventListener("change", (e) => setFilter("aborted", e.target.value));

async function poll() {
  if (!document.hidden) {
    try {
      await Promise.all([loadOverview(), loadTasks(), loadList(), refreshTrajectory()]);
      $("live").className = "";
      $("live").textContent = `live · ${new Date().toLocaleTimeString()}`;
    } catch (err) {
      $("live").className = "stale";
      $("live").textContent = `offline (${err.message})`;
    }
  }
  setTimeout(poll, POLL_MS);
}

async function start() {
  const hash = new URLSearchParams(location.hash.slice(1));
  await Promise.all([loadOverview(), loadTasks(), loadList()]);
  if (hash.get("traj")) {
    await openTrajectory(hash.get("traj"), Number(hash.get("step") || 0));
    state.sel = state.page.items.findIndex((t) => t.trajectory_id === hash.get("traj"));
    renderList();
  }
  $("live").textContent = `live · ${new Date().toLocaleTimeString()}`;
  window.viewerReady = true;
  setTimeout(poll, POLL_MS);
}

start();
