// The controller status page: polls /ui/api/state every second and renders it. No framework, no build.
"use strict";
(() => {
  const $ = (sel) => document.querySelector(sel);
  const POLL_MS = 1000;
  let token = sessionStorage.getItem("controllerToken") || "";
  let lastMasters = null;
  let lastLeader = null;
  let names = {}; // raft id -> n1, n2, ... (the leader's jRaftInitConf order, as `controllerd local-cluster` names them)

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== null && v !== undefined && v !== false) e.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children.flat()) e.append(c instanceof Node ? c : document.createTextNode(c ?? ""));
    return e;
  }
  const mark = (good, yes, no) => el("span", { class: good ? "ok" : "bad" }, good ? "\u2714 " + yes : "\u2716 " + no);
  const ms = (v) => (v === null || v === undefined ? "\u2014" : v < 1000 ? `${v} ms` : `${(v / 1000).toFixed(1)} s`);
  const plural = (n, one, many) => `${n} ${n === 1 ? one : many}`;
  const num = (v) => (v === null || v === undefined ? "\u2014" : String(v));
  // A heartbeat's epoch or offset: -1 is RocketMQ's default for a field the broker did not send.
  const progress = (v) => (v === -1 ? el("span", { class: "muted", title: "not in the broker's heartbeats (-1)" }, "not reported")
                                     : num(v));
  const pad = (n) => String(n).padStart(2, "0");
  // 24-hour local time, as the logs print it; with the date when not today (the history outlives restarts).
  function clock(t) {
    const d = new Date(t * 1000);
    const hms = `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
    const day = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
    return d.toDateString() === new Date().toDateString() ? hms : `${day} ${hms}`;
  }
  const nameOf = (id) => (id && names[id]) || id;
  const labelOf = (id) => (id && names[id] ? `${names[id]}, ${id}` : id);

  function renderNodes(nodes, leaderId) {
    const body = $("#nodes tbody");
    body.replaceChildren(...nodes.map((n) => el("tr", {},
      el("th", { scope: "row" }, n.name || n.id,
         el("span", { class: "addr" }, (n.name ? ` ${n.id}` : "") + (n.httpAddress ? ` \u00b7 HTTP ${n.httpAddress}` : ""))),
      el("td", {}, n.id === leaderId ? el("strong", {}, "leader") : num(n.role)),
      el("td", { class: "num" }, num(n.term)),
      el("td", { class: "num" }, num(n.commitIndex)),
      el("td", { class: "num" }, num(n.appliedIndex)),
      el("td", { class: "num" }, n.lagEntries !== null && n.lagEntries !== undefined ? plural(n.lagEntries, "entry", "entries")
                                 : n.applyLag !== undefined ? `${n.applyLag} to apply` : "\u2014"),
      el("td", { class: "num" }, n.id === leaderId ? "\u2014" : ms(n.lastContactMs)),
      el("td", {}, n.snapshotIndex ? `#${n.snapshotIndex}` + (n.snapshotAgeS !== null && n.snapshotAgeS !== undefined
                                     ? `, ${Math.round(n.snapshotAgeS)} s old` : "") : "none"),
      el("td", {}, n.health === "ready" ? mark(true, "ready", "")
                   : el("span", { class: "bad", title: (n.failedChecks || []).join("; ") }, "\u2716 " + n.health)),
    )));
  }

  function renderBrokers(sets) {
    const box = $("#brokers");
    if (!sets.length) { box.replaceChildren(el("p", {}, "No broker set has registered yet.")); return; }
    box.replaceChildren(...sets.map((s) => {
      const master = s.replicas.find((r) => r.master);
      const inSync = s.replicas.filter((r) => r.inSync).map((r) => r.brokerId);
      return el("article", { class: "set", "aria-labelledby": `set-${s.brokerName}` },
        el("h3", { id: `set-${s.brokerName}` }, s.brokerName,
           el("span", { class: "muted" }, s.clusterName ? ` \u00b7 ${s.clusterName}` : "")),
        el("p", { "data-testid": `master-${s.brokerName}` },
           s.masterBrokerId === null ? el("span", { class: "bad" }, "No master")
             : `Master: broker ${s.masterBrokerId}` + (master ? ` at ${master.brokerAddress}` : ""),
           ` \u00b7 master epoch ${s.masterEpoch} \u00b7 SyncStateSet {${inSync.join(", ")}} (epoch ${s.syncStateSetEpoch})`),
        el("div", { class: "wide" }, el("table", {},
          el("caption", { class: "visually-hidden" }, `Replicas of ${s.brokerName}`),
          el("thead", {}, el("tr", {}, ...["Broker id", "Address", "Role", "In sync", "Alive", "Last heartbeat",
                                            "Epoch", "Max offset"].map((h) => el("th", { scope: "col" }, h)))),
          el("tbody", {}, ...s.replicas.map((r) => el("tr", { class: r.master ? "master-row" : null },
            el("th", { scope: "row" }, String(r.brokerId)),
            el("td", {}, r.brokerAddress),
            el("td", {}, r.master ? el("strong", {}, "master") : "slave"),
            el("td", {}, mark(r.inSync, "in sync", "not in sync")),
            el("td", {}, mark(r.alive, "alive", "down")),
            el("td", { class: "num" }, r.lastHeartbeatMsAgo === null ? "none (expired)" : `${ms(r.lastHeartbeatMsAgo)} ago`),
            el("td", { class: "num" }, progress(r.epoch)),
            el("td", { class: "num" }, progress(r.maxOffset)),
          ))),
        )));
    }));
  }

  function renderAlarms(alarms) {
    const body = $("#alarms tbody");
    if (!alarms || !alarms.length) {
      body.replaceChildren(el("tr", {}, el("td", { colspan: 4, class: "muted" }, "None raised.")));
      return;
    }
    // A raised alarm is a failure: NOSPACE refuses writes that grow the state until it is disarmed.
    body.replaceChildren(...alarms.map((a) => el("tr", { class: "bad" },
      el("td", {}, el("strong", { class: "bad" }, "\u2716 " + a.alarm)),
      el("td", {}, labelOf(a.memberId)),
      el("td", {}, el("time", { datetime: new Date(a.raisedAtMillis).toISOString() }, clock(a.raisedAtMillis / 1000))),
      el("td", {}, a.detail))));
  }

  function renderEvents(events) {
    const list = $("#events");
    if (!events.length) { list.replaceChildren(el("li", { class: "muted" }, "None recorded yet.")); return; }
    // A change (an election, a new leader) in bold; a failure (no master) marked as one; an answer that
    // changed nothing (2011: the master is still alive) as a plain line.
    const text = (e) => (e.level === "info" ? el("span", {}, e.text)
                         : e.level === "failure" ? el("strong", { class: "bad" }, "\u2716 " + e.text)
                         : el("strong", {}, e.text));
    list.replaceChildren(...events.slice(0, 30).map((e) => el("li", { class: e.level || "change" },
      el("time", { datetime: new Date(e.t * 1000).toISOString() }, clock(e.t)),
      text(e), ` \u2014 ${e.reason}`)));
  }

  function announce(state) {
    const masters = Object.fromEntries(state.brokerSets.map((s) => [s.brokerName, s.masterBrokerId]));
    const said = [];
    if (lastLeader !== null && state.leaderId && state.leaderId !== lastLeader) said.push(`Controller leader is now ${nameOf(state.leaderId)}.`);
    if (lastMasters) {
      for (const [name, m] of Object.entries(masters)) {
        if (name in lastMasters && lastMasters[name] !== m) said.push(m === null ? `${name} has no master.` : `${name}: broker ${m} is the new master.`);
      }
    }
    if (said.length) $("#announce").textContent = said.join(" ");
    lastMasters = masters;
    if (state.leaderId) lastLeader = state.leaderId;
  }

  function render(state) {
    const view = $("#view");
    names = state.names || {};
    if (state.view === "leader") {
      view.className = "view";
      view.textContent = `Leader's view (${labelOf(state.leaderId)}), served by ${nameOf(state.servedBy)}, ` +
                         `updated ${clock(state.generatedAt)}.`;
    } else {
      view.className = "view follower";
      view.textContent = `Follower's view from ${nameOf(state.servedBy)}: ${state.note}`;
    }
    renderNodes(state.nodes, state.view === "leader" ? state.leaderId : null);
    renderAlarms(state.alarms);
    renderBrokers(state.brokerSets);
    renderEvents(state.events);
    announce(state);
  }

  async function poll() {
    try {
      const r = await fetch("/ui/api/state", { headers: token ? { Authorization: `Bearer ${token}` } : {}, cache: "no-store" });
      if (r.status === 401) {
        $("#token-form").hidden = false;
        $("#view").textContent = token ? "The admin token was refused." : "An admin token is needed.";
        return;
      }
      $("#token-form").hidden = true;
      if (!r.ok) throw new Error(`HTTP ${r.status}`);
      render(await r.json());
    } catch (err) {
      const view = $("#view");
      view.className = "view follower";
      view.textContent = `This node does not answer (${err.message}); retrying.`;
    } finally {
      setTimeout(poll, POLL_MS);
    }
  }

  $("#token-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    token = $("#token").value;
    sessionStorage.setItem("controllerToken", token);
  });
  poll();
})();
