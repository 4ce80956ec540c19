// hopper web UI: a read-only single page over the Queue REST API of the
// same origin. No framework and no build step. Every piece of data from
// the API is put into the page as text (textContent / text nodes), never
// as markup, and links are only made from vetted URLs (see safeHref).
'use strict';

(() => {
  const API = '/api/queue/v1';
  const QUEUE_REFRESH_MS = 2000;
  const TASK_REFRESH_MS = 2000;
  const MAX_LOG_CHARS = 2000000;
  const MAX_GROUP_TASKS = 10000;
  const SLUGID = /^[A-Za-z0-9_-]{8}[Q-T][A-Za-z0-9_-][CGKOSWaeimquy26-][A-Za-z0-9_-]{10}[AQgw]$/;
  const SLUGID_ANYWHERE = /[A-Za-z0-9_-]{8}[Q-T][A-Za-z0-9_-][CGKOSWaeimquy26-][A-Za-z0-9_-]{10}[AQgw]/;
  const TASK_QUEUE_ID = /^[a-zA-Z0-9_-]{1,38}\/[a-z]([-a-z0-9]{0,36}[a-z0-9])?$/;
  const STATES = ['unscheduled', 'pending', 'running', 'completed', 'failed', 'exception'];
  const RESOLVED = new Set(['completed', 'failed', 'exception']);
  // The progress bar fills from the left with resolved tasks.
  const BAR_ORDER = ['completed', 'failed', 'exception', 'running', 'pending', 'unscheduled'];
  const DEFAULT_LIVE_LOG = 'public/logs/live.log';
  const DEFAULT_BACKING_LOG = 'public/logs/live_backing.log';

  // ---------------------------------------------------------------- DOM

  // h builds an element. Strings among children become text nodes, so data
  // can never turn into markup. Attributes named on* take functions.
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') {
        el.addEventListener(k.slice(2), v);
      } else if (k === 'class') {
        el.className = v;
      } else if (k === 'href') {
        const safe = safeHref(v);
        if (safe !== null) el.setAttribute('href', safe);
      } else {
        el.setAttribute(k, v === true ? '' : String(v));
      }
    }
    append(el, children);
    return el;
  }

  // fill replaces el's children, with the same conversions as h.
  function fill(el, ...children) {
    el.replaceChildren();
    append(el, children);
    return el;
  }

  function append(el, children) {
    for (const c of children) {
      if (c === null || c === undefined || c === false) continue;
      if (Array.isArray(c)) append(el, c);
      else if (c instanceof Node) el.appendChild(c);
      else el.appendChild(document.createTextNode(String(c)));
    }
  }

  // safeHref lets through in-page routes, same-origin absolute paths and
  // http(s) URLs; anything else (javascript:, data:…) yields no link.
  function safeHref(url) {
    const s = String(url);
    if (s.startsWith('#') || (s.startsWith('/') && !s.startsWith('//'))) return s;
    try {
      const u = new URL(s);
      if (u.protocol === 'http:' || u.protocol === 'https:') return u.href;
    } catch (_) { /* not a URL */ }
    return null;
  }

  function link(href, ...children) { return h('a', { href }, ...children); }
  function taskLink(taskId, label) { return h('a', { href: '#/task/' + taskId, class: 'mono' }, label || taskId); }
  function groupLink(id) { return h('a', { href: '#/group/' + id, class: 'mono' }, id); }
  function queueLink(id) { return h('a', { href: '#/queue/' + encodeURIComponent(id), class: 'mono' }, id); }
  function badge(state) { return h('span', { class: 'state state-' + (STATES.includes(state) ? state : 'unknown') }, state || '?'); }
  function muted(...c) { return h('span', { class: 'muted' }, ...c); }

  function table(headers, rows, empty) {
    if (!rows.length) return h('p', { class: 'empty' }, empty || 'None.');
    return h('div', { class: 'table-wrap' },
      h('table', {},
        h('thead', {}, h('tr', {}, headers.map((x) => h('th', {}, x)))),
        h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c) => h('td', {}, c)))))));
  }

  // kv renders a definition list from [label, value] pairs, skipping
  // pairs whose value is null.
  function kv(pairs) {
    return h('dl', { class: 'kv' }, pairs.filter((p) => p[1] !== null && p[1] !== undefined)
      .map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
  }

  function section(title, ...body) {
    return h('section', { class: 'card' }, title ? h('h2', {}, title) : null, ...body);
  }

  function errorBox(err) {
    return h('div', { class: 'error' }, errorText(err));
  }

  function errorText(err) {
    if (err instanceof ApiError) {
      const code = err.code ? err.code + ': ' : '';
      return 'HTTP ' + err.status + ' ' + code + err.message;
    }
    return String(err && err.message ? err.message : err);
  }

  // ---------------------------------------------------------------- time

  function fmtTime(iso) {
    if (!iso) return '';
    const d = new Date(iso);
    if (isNaN(d)) return String(iso);
    const p = (n) => String(n).padStart(2, '0');
    return d.getFullYear() + '-' + p(d.getMonth() + 1) + '-' + p(d.getDate()) + ' ' +
      p(d.getHours()) + ':' + p(d.getMinutes()) + ':' + p(d.getSeconds());
  }

  function fmtDuration(ms) {
    if (!(ms >= 0)) return '';
    if (ms < 1000) return Math.round(ms) + ' ms';
    const s = Math.round(ms / 1000);
    if (s < 60) return s + ' s';
    const m = Math.floor(s / 60);
    if (m < 60) return m + ' min ' + (s % 60) + ' s';
    const hrs = Math.floor(m / 60);
    if (hrs < 48) return hrs + ' h ' + (m % 60) + ' min';
    return Math.floor(hrs / 24) + ' d ' + (hrs % 24) + ' h';
  }

  function relTime(iso) {
    const t = Date.parse(iso);
    if (isNaN(t)) return '';
    const diff = t - Date.now();
    if (Math.abs(diff) < 1500) return 'now';
    return diff < 0 ? fmtDuration(-diff) + ' ago' : 'in ' + fmtDuration(diff);
  }

  // when shows a time relative to now, with the exact time on hover.
  function when(iso) {
    if (!iso) return muted('—');
    return h('time', { datetime: iso, title: fmtTime(iso) }, relTime(iso));
  }

  function between(a, b) {
    const x = Date.parse(a);
    const y = b ? Date.parse(b) : Date.now();
    return isNaN(x) || isNaN(y) ? '' : fmtDuration(y - x);
  }

  // ---------------------------------------------------------------- API

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  // api calls the Queue API without credentials (the anonymous role).
  async function api(path, opts = {}) {
    const init = { signal: opts.signal, cache: 'no-store', credentials: 'omit', headers: { Accept: 'application/json' } };
    if (opts.body !== undefined) {
      init.method = 'POST';
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(opts.body);
    }
    const res = await fetch(API + path, init);
    let data = null;
    try { data = await res.json(); } catch (_) { /* empty or non-JSON body */ }
    if (!res.ok) {
      // Taskcluster error messages append request details after a
      // "---" line; the first part is what a person needs.
      const msg = data && typeof data.message === 'string' ? data.message.split(/\n\s*---/)[0].trim() : res.statusText;
      throw new ApiError(res.status, data && data.code, msg);
    }
    return data;
  }

  // apiPages follows continuation tokens, collecting data[key] until the
  // list ends or max items were read. It reports whether it stopped early.
  async function apiPages(path, key, opts = {}) {
    const max = opts.max || 1000;
    const items = [];
    let token = '';
    for (;;) {
      const sep = path.includes('?') ? '&' : '?';
      const page = await api(path + sep + 'limit=' + Math.min(1000, max) + (token ? '&continuationToken=' + encodeURIComponent(token) : ''), opts);
      items.push(...(page[key] || []));
      token = page.continuationToken || '';
      if (!token) return { items, more: false, page };
      if (items.length >= max) return { items, more: true, page };
    }
  }

  // Artifact names keep their slashes in URLs so downloads get a sensible
  // file name; each segment is escaped.
  function artifactPath(name) { return name.split('/').map(encodeURIComponent).join('/'); }
  function artifactURL(taskId, runId, name) { return API + '/task/' + taskId + '/runs/' + runId + '/artifacts/' + artifactPath(name); }

  // ---------------------------------------------------------------- views

  const main = document.getElementById('main');
  const refreshState = document.getElementById('refresh-state');
  let current = null;

  // View owns everything a page starts: fetches are aborted and timers
  // cleared when the user navigates away.
  class View {
    constructor() {
      this.ctl = new AbortController();
      this.signal = this.ctl.signal;
      this.timers = new Set();
    }
    get stopped() { return this.signal.aborted; }
    stop() {
      this.ctl.abort();
      for (const t of this.timers) clearTimeout(t);
      this.timers.clear();
    }
    later(ms, fn) {
      if (this.stopped) return;
      const t = setTimeout(() => { this.timers.delete(t); if (!this.stopped) fn(); }, ms);
      this.timers.add(t);
    }
    // poll runs fn now and again ms after each run finishes while fn
    // returns true; a hidden tab waits instead of polling.
    poll(ms, fn) {
      const tick = async () => {
        if (document.hidden) { this.later(ms, tick); return; }
        let again = true;
        try {
          again = await fn();
        } catch (err) {
          if (this.stopped) return;
          console.error(err);
        }
        if (this.stopped) return;
        if (again) {
          setRefresh('Updated ' + fmtTime(new Date().toISOString()).slice(11) + ' · refreshing every ' + ms / 1000 + ' s');
          this.later(ms, tick);
        }
      };
      tick();
    }
  }

  function setRefresh(text) { refreshState.textContent = text; }

  function render(...nodes) { fill(main, nodes); }

  function crumbs(...parts) {
    const out = [link('#/', 'Task queues')];
    for (const p of parts) out.push(h('span', { class: 'sep' }, '›'), p);
    return h('nav', { class: 'crumbs' }, out);
  }

  function route() {
    if (current) current.stop();
    current = new View();
    setRefresh('');
    const raw = location.hash.replace(/^#\/?/, '');
    const parts = raw.split('/');
    let arg = '';
    // Queue ids and search queries may hold a slash even when a person
    // typed the address without escaping it.
    const rest = parts[0] === 'queue' || parts[0] === 'search' ? parts.slice(1).join('/') : parts[1] || '';
    try { arg = decodeURIComponent(rest); } catch (_) { arg = rest; }
    document.getElementById('nav-queues').classList.toggle('active', parts[0] === '' || parts[0] === 'queue');
    window.scrollTo(0, 0);
    switch (parts[0]) {
      case '':
        return queuesView(current);
      case 'queue':
        return queueView(current, arg);
      case 'task': {
        const run = parts[2] === 'runs' && /^\d+$/.test(parts[3] || '') ? Number(parts[3]) : null;
        return taskView(current, arg, run);
      }
      case 'group':
        return groupView(current, arg);
      case 'search':
        return searchView(current, arg);
      default:
        document.title = 'Not found · hopper';
        render(crumbs(), h('h1', {}, 'Not found'), h('p', {}, 'This page does not exist.'));
    }
  }

  // ---------------------------------------------------------------- queues

  function queuesView(view) {
    document.title = 'Task queues · hopper';
    const body = h('div', {}, h('p', { class: 'loading' }, 'Loading…'));
    render(h('h1', {}, 'Task queues'),
      h('p', { class: 'lead' }, 'Queues appear once a worker has asked them for work. Click a queue to see its pending and claimed tasks.'),
      body);
    view.poll(QUEUE_REFRESH_MS, async () => {
      let queues;
      try {
        ({ items: queues } = await apiPages('/task-queues', 'taskQueues', { signal: view.signal, max: 5000 }));
      } catch (err) {
        if (!view.stopped) fill(body, errorBox(err));
        return true;
      }
      const counts = await mapLimit(queues, 8, (q) =>
        api('/task-queues/' + encodeURIComponent(q.taskQueueId) + '/counts', { signal: view.signal }).catch((err) => ({ err })));
      if (view.stopped) return false;
      const described = queues.some((q) => q.description);
      const rows = queues.map((q, i) => {
        const c = counts[i];
        const num = (n, cls) => c.err ? muted('?') : h('span', { class: 'count ' + (n > 0 ? cls : 'zero') }, String(n));
        const row = [queueLink(q.taskQueueId), num(c.pendingTasks, 'pending'), num(c.claimedTasks, 'running'),
          when(q.lastDateActive), h('span', { class: 'muted' }, q.stability || '')];
        return described ? row.concat(q.description || '') : row;
      });
      const headers = ['Task queue', 'Pending', 'Claimed', 'Last active', 'Stability'];
      fill(body, table(described ? headers.concat('Description') : headers, rows,
        'No task queues yet. Start a worker (hopper dev runs one) and its queue shows up here.'));
      return true;
    });
  }

  async function mapLimit(items, limit, fn) {
    const out = new Array(items.length);
    let next = 0;
    const worker = async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]);
      }
    };
    await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
    return out;
  }

  function queueView(view, id) {
    document.title = id + ' · hopper';
    if (!TASK_QUEUE_ID.test(id)) {
      render(crumbs(), h('h1', {}, 'Not a task queue'), errorBox(new Error('"' + id + '" is not a task queue id (provisionerId/workerType).')));
      return;
    }
    const q = encodeURIComponent(id);
    const stats = h('div', { class: 'stats' });
    const info = h('div', {});
    const pending = h('div', {}, h('p', { class: 'loading' }, 'Loading…'));
    const claimed = h('div', {}, h('p', { class: 'loading' }, 'Loading…'));
    render(crumbs(h('span', { class: 'mono' }, id)), h('h1', { class: 'mono' }, id), info, stats,
      section('Claimed tasks', claimed), section('Pending tasks', pending));
    api('/task-queues/' + q, { signal: view.signal }).then((tq) => {
      fill(info, kv([['Description', tq.description || null], ['Stability', tq.stability],
        ['Last active', when(tq.lastDateActive)], ['Expires', when(tq.expires)]]));
    }, () => { /* no worker has polled yet: nothing to show */ });
    view.poll(QUEUE_REFRESH_MS, async () => {
      const [counts, p, c] = await Promise.allSettled([
        api('/task-queues/' + q + '/counts', { signal: view.signal }),
        apiPages('/task-queues/' + q + '/pending', 'tasks', { signal: view.signal, max: 500 }),
        apiPages('/task-queues/' + q + '/claimed', 'tasks', { signal: view.signal, max: 500 }),
      ]);
      if (view.stopped) return false;
      if (counts.status === 'fulfilled') {
        fill(stats, stat('Pending', counts.value.pendingTasks, 'pending'), stat('Claimed', counts.value.claimedTasks, 'running'));
      } else {
        fill(stats, errorBox(counts.reason));
      }
      fill(pending, listOrError(p, (r) => table(['Task', 'Name', 'Run', 'Priority', 'Queued'],
        r.items.map((e) => [taskLink(e.taskId), taskName(e.task), String(e.runId), e.task.priority, when(e.inserted)]),
        'No pending tasks.'), 'queue:pending-list:' + id));
      fill(claimed, listOrError(c, (r) => table(['Task', 'Name', 'Run', 'Worker', 'Claimed'],
        r.items.map((e) => [taskLink(e.taskId), taskName(e.task), String(e.runId), h('span', { class: 'mono' }, e.workerGroup + '/' + e.workerId), when(e.claimed)]),
        'No claimed tasks.'), 'queue:claimed-list:' + id));
      return true;
    });
  }

  function listOrError(settled, ok, scope) {
    if (settled.status === 'rejected') {
      const err = settled.reason;
      if (err instanceof ApiError && err.status === 403) {
        return h('p', { class: 'notice' }, 'Listing these tasks needs the scope ', h('code', {}, scope),
          ', which the anonymous role does not grant on this deployment.');
      }
      return errorBox(err);
    }
    const out = [ok(settled.value)];
    if (settled.value.more) out.push(h('p', { class: 'muted' }, 'Showing the first ' + settled.value.items.length + '.'));
    return out;
  }

  function stat(label, n, cls) {
    return h('div', { class: 'stat' }, h('div', { class: 'stat-n ' + (n > 0 ? cls : 'zero') }, String(n)), h('div', { class: 'stat-l' }, label));
  }

  function taskName(task) {
    const n = task && task.metadata && task.metadata.name;
    return n ? n : muted('(unnamed)');
  }

  // ---------------------------------------------------------------- task

  function taskView(view, taskId, chosenRun) {
    document.title = taskId + ' · hopper';
    if (!SLUGID.test(taskId)) {
      render(crumbs(), h('h1', {}, 'Not a task id'), errorBox(new Error('"' + taskId + '" is not a taskId.')));
      return;
    }
    const head = h('div', {}, h('h1', { class: 'mono' }, taskId), h('p', { class: 'loading' }, 'Loading…'));
    const top = h('div', { class: 'crumb-slot' }, crumbs(h('span', { class: 'mono' }, taskId)));
    const defn = h('div', {});
    const runs = h('div', {});
    const artifacts = h('div', {});
    const deps = h('div', {});
    const dependents = h('div', {});
    const logSlot = h('div', {});
    render(top, head, h('div', { class: 'grid' },
      section('Definition', defn), section('Runs', runs)),
    section('Log', logSlot), section('Artifacts', artifacts),
    h('div', { class: 'grid' }, section('Dependencies', deps), section('Dependents', dependents)));

    let task = null;
    let log = null;
    view.poll(TASK_REFRESH_MS, async () => {
      let status;
      try {
        if (!task) {
          task = await api('/task/' + taskId, { signal: view.signal });
          fill(top, crumbs(queueLink(task.taskQueueId || task.provisionerId + '/' + task.workerType),
            h('span', {}, 'group ', groupLink(task.taskGroupId)), h('span', { class: 'mono' }, taskId)));
          fill(defn, definition(task));
          log = new LogPanel(view, taskId, logNames(task));
          fill(logSlot, log.el);
        }
        status = (await api('/task/' + taskId + '/status', { signal: view.signal })).status;
      } catch (err) {
        if (view.stopped) return false;
        if (!task) {
          fill(head, h('h1', { class: 'mono' }, taskId), errorBox(err));
          return !(err instanceof ApiError && err.status === 404);
        }
        fill(head, h('h1', { class: 'mono' }, taskId), errorBox(err));
        return true;
      }
      const name = task.metadata && task.metadata.name;
      document.title = (name || taskId) + ' · hopper';
      fill(head, h('div', { class: 'title-row' }, h('h1', {}, name || taskId), badge(status.state)),
        h('p', { class: 'subtitle' }, h('span', { class: 'mono' }, taskId),
          task.metadata && task.metadata.description ? ' · ' + task.metadata.description : ''));

      const runId = chosenRun !== null && chosenRun < status.runs.length ? chosenRun : status.runs.length - 1;
      fill(runs, runsTable(taskId, status, runId));
      const [arts, depStates, dependentList] = await Promise.allSettled([
        runId >= 0 ? apiPages('/task/' + taskId + '/runs/' + runId + '/artifacts', 'artifacts', { signal: view.signal }) : Promise.resolve(null),
        dependencyStates(view, task),
        apiPages('/task/' + taskId + '/dependents', 'tasks', { signal: view.signal, max: 200 }),
      ]);
      if (view.stopped) return false;
      fill(artifacts, artifactList(taskId, runId, status, arts));
      fill(deps, dependencyList(task, depStates));
      fill(dependents, dependentList.status === 'fulfilled'
        ? table(['Task', 'Name', 'State'], dependentList.value.items.map((t) => [taskLink(t.status.taskId), taskName(t.task), badge(t.status.state)]), 'No task depends on this one.')
        : errorBox(dependentList.reason));
      log.update(status, runId);
      const live = !RESOLVED.has(status.state);
      if (!live) setRefresh('Task resolved · auto-refresh stopped (reload to check for reruns)');
      return live;
    });
  }

  function definition(task) {
    const md = task.metadata || {};
    const list = (xs) => xs && xs.length ? h('ul', { class: 'plain' }, xs.map((x) => h('li', { class: 'mono' }, x))) : null;
    const tags = task.tags && Object.keys(task.tags).length
      ? h('ul', { class: 'plain' }, Object.entries(task.tags).map(([k, v]) => h('li', {}, h('span', { class: 'mono' }, k), ': ', v)))
      : null;
    return [kv([
      ['Task queue', queueLink(task.taskQueueId || task.provisionerId + '/' + task.workerType)],
      ['Task group', groupLink(task.taskGroupId)],
      ['Owner', md.owner || null],
      ['Source', md.source ? (safeHref(md.source) && /^https?:/.test(md.source) ? link(md.source, md.source) : md.source) : null],
      ['Priority', task.priority],
      ['Retries', task.retries === undefined ? null : String(task.retries)],
      ['Requires', task.requires],
      ['Scheduler', h('span', { class: 'mono' }, task.schedulerId)],
      ['Project', h('span', { class: 'mono' }, task.projectId)],
      ['Created', when(task.created)],
      ['Deadline', when(task.deadline)],
      ['Expires', when(task.expires)],
      ['Routes', list(task.routes)],
      ['Scopes', list(task.scopes)],
      ['Tags', tags],
    ]),
    h('details', { class: 'payload' }, h('summary', {}, 'Payload'), h('pre', {}, JSON.stringify(task.payload, null, 2))),
    h('details', { class: 'payload' }, h('summary', {}, 'Full definition (JSON)'), h('pre', {}, JSON.stringify(task, null, 2)))];
  }

  function runsTable(taskId, status, selected) {
    if (!status.runs.length) {
      return h('p', { class: 'empty' }, status.state === 'unscheduled'
        ? 'No runs yet: the task is waiting for its dependencies (or to be scheduled).'
        : 'No runs yet.');
    }
    const rows = status.runs.map((r) => [
      r.runId === selected ? h('strong', {}, String(r.runId)) : link('#/task/' + taskId + '/runs/' + r.runId, String(r.runId)),
      badge(r.state),
      h('span', {}, r.reasonCreated || '', r.reasonResolved ? h('span', { class: 'muted' }, ' → ' + r.reasonResolved) : ''),
      r.workerId ? h('span', { class: 'mono' }, r.workerGroup + '/' + r.workerId) : muted('—'),
      r.started ? when(r.started) : r.scheduled ? muted('queued ', when(r.scheduled)) : muted('—'),
      r.started ? between(r.started, r.resolved) : muted('—'),
    ]);
    return [kv([['Retries left', String(status.retriesLeft)]]),
      table(['Run', 'State', 'Reason', 'Worker', 'Started', 'Duration'], rows)];
  }

  function artifactList(taskId, runId, status, settled) {
    if (runId < 0) return h('p', { class: 'empty' }, 'No runs, so no artifacts.');
    if (settled.status === 'rejected') return errorBox(settled.reason);
    const items = settled.value.items;
    const note = h('p', { class: 'muted' }, 'Run ' + runId + (runId === status.runs.length - 1 ? ' (latest)' : '') +
      '. Without credentials only public/ artifacts can be downloaded.');
    return [note, table(['Name', 'Type', 'Storage', 'Expires'], items.map((a) => [
      a.name.startsWith('public/') ? h('a', { href: artifactURL(taskId, runId, a.name), class: 'mono', rel: 'noopener' }, a.name)
        : h('span', { class: 'mono', title: 'needs credentials to download' }, a.name, ' 🔒'),
      h('span', { class: 'muted' }, a.contentType || ''),
      a.storageType,
      when(a.expires),
    ]), 'No artifacts.')];
  }

  // dependencyStates reads names and states of (at most 100 of) the
  // task's dependencies in two batch calls.
  async function dependencyStates(view, task) {
    const ids = (task.dependencies || []).slice(0, 100);
    if (!ids.length) return { names: {}, states: {} };
    const [defs, sts] = await Promise.all([
      api('/tasks', { signal: view.signal, body: { taskIds: ids } }),
      api('/tasks/status', { signal: view.signal, body: { taskIds: ids } }),
    ]);
    const names = {};
    const states = {};
    for (const t of defs.tasks || []) names[t.taskId] = t.task;
    for (const s of sts.statuses || []) states[s.taskId] = s.status.state;
    return { names, states };
  }

  function dependencyList(task, settled) {
    const ids = task.dependencies || [];
    const all = ids.length > 0 && (task.requires === 'all-resolved' ? 'Runs once all of these resolve.' : 'Runs once all of these complete.');
    if (!ids.length) return h('p', { class: 'empty' }, 'No dependencies.');
    const known = settled.status === 'fulfilled' ? settled.value : { names: {}, states: {} };
    const rows = ids.slice(0, 100).map((id) => [taskLink(id), id in known.names ? taskName(known.names[id]) : muted('—'),
      id in known.states ? badge(known.states[id]) : muted('unknown')]);
    return [h('p', { class: 'muted' }, all), table(['Task', 'Name', 'State'], rows),
      ids.length > 100 ? h('p', { class: 'muted' }, 'and ' + (ids.length - 100) + ' more') : null,
      settled.status === 'rejected' ? errorBox(settled.reason) : null];
  }

  function logNames(task) {
    const logs = task.payload && typeof task.payload === 'object' && task.payload.logs && typeof task.payload.logs === 'object' ? task.payload.logs : {};
    return {
      live: typeof logs.live === 'string' && logs.live ? logs.live : DEFAULT_LIVE_LOG,
      backing: typeof logs.backing === 'string' && logs.backing ? logs.backing : DEFAULT_BACKING_LOG,
    };
  }

  // ---------------------------------------------------------------- log

  // LogPanel shows one run's log: streamed from the worker's live-log
  // server while the run is running, the uploaded backing log once it is
  // resolved. The live log replays from the start on every connection, so
  // a reconnection clears the panel first.
  class LogPanel {
    constructor(view, taskId, names) {
      this.view = view;
      this.taskId = taskId;
      this.names = names;
      this.key = '';
      this.ctl = null;
      this.carry = '';
      this.size = 0;
      this.msg = h('p', { class: 'muted' });
      this.tools = h('div', { class: 'log-tools' });
      this.pre = h('pre', { class: 'log', tabindex: '0' });
      this.el = h('div', {}, h('div', { class: 'log-head' }, this.msg, this.tools), this.pre);
      view.signal.addEventListener('abort', () => this.abort());
    }

    abort() {
      if (this.ctl) this.ctl.abort();
      this.ctl = null;
    }

    say(...c) { fill(this.msg, c); }

    // update is called on every status refresh; it (re)starts reading
    // only when the run or its phase changed.
    update(status, runId) {
      const run = status.runs[runId];
      if (!run) {
        this.show('none', () => this.say('No runs yet, so no log.'));
        return;
      }
      if (run.state === 'pending') {
        this.show('pending:' + runId, () => this.say('Run ' + runId + ' is pending: the log appears once a worker starts it.'));
        return;
      }
      const phase = run.state === 'running' ? 'live' : 'final';
      this.show(phase + ':' + runId, () => (phase === 'live' ? this.streamLive(runId) : this.loadFinal(runId)));
    }

    show(key, start) {
      if (this.key === key) return;
      this.key = key;
      this.abort();
      this.ctl = new AbortController();
      this.clear();
      fill(this.tools);
      start();
    }

    clear() {
      fill(this.pre);
      this.size = 0;
      this.carry = '';
    }

    stillCurrent(ctl) { return this.ctl === ctl && !ctl.signal.aborted; }

    async streamLive(runId) {
      const ctl = this.ctl;
      const contentPath = '/task/' + this.taskId + '/runs/' + runId + '/artifact-content/' + artifactPath(this.names.live);
      let content;
      for (;;) {
        try {
          content = await api(contentPath, { signal: ctl.signal });
          break;
        } catch (err) {
          if (!this.stillCurrent(ctl)) return;
          if (err instanceof ApiError && err.status === 404) {
            this.say('Run ' + runId + ' is running; waiting for the worker to publish ' + this.names.live + '…');
            await sleep(2000, ctl.signal);
            if (!this.stillCurrent(ctl)) return;
            continue;
          }
          this.say(errorText(err));
          return;
        }
      }
      if (content.storageType !== 'reference') {
        // The live log already points at the uploaded log.
        await this.loadURL(ctl, content, runId, this.names.live);
        return;
      }
      this.say(h('span', { class: 'live-dot' }), 'Streaming the live log of run ' + runId + '…');
      fill(this.tools, h('a', { href: content.url, target: '_blank', rel: 'noopener noreferrer' }, 'open raw'));
      try {
        const res = await fetch(content.url, { signal: ctl.signal, cache: 'no-store', credentials: 'omit' });
        if (!res.ok || !res.body) throw new Error('HTTP ' + res.status);
        const reader = res.body.getReader();
        const dec = new TextDecoder();
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          this.write(dec.decode(value, { stream: true }));
        }
        this.write(dec.decode());
        if (this.stillCurrent(ctl)) this.say('The live log ended; the full log follows once the run is resolved.');
      } catch (err) {
        if (!this.stillCurrent(ctl)) return;
        // Browsers refuse cross-origin reads the log server does not
        // allow (CORS); the link still works as a plain page.
        fill(this.tools);
        this.say('This page could not read the live log (', errorText(err),
          '; the log server may not allow cross-origin reads). Open it directly: ',
          h('a', { href: content.url, target: '_blank', rel: 'noopener noreferrer' }, 'live log of run ' + runId), '.');
      }
    }

    async loadFinal(runId) {
      const ctl = this.ctl;
      let lastErr = null;
      // The backing log first; after the run the live name links to it,
      // which covers tasks that renamed only one of the two.
      for (const name of [this.names.backing, this.names.live]) {
        let content;
        try {
          content = await api('/task/' + this.taskId + '/runs/' + runId + '/artifact-content/' + artifactPath(name), { signal: ctl.signal });
        } catch (err) {
          if (!this.stillCurrent(ctl)) return;
          lastErr = err;
          continue;
        }
        if (content.storageType === 'reference') {
          lastErr = new Error(name + ' still points at a live-log server that is gone (the worker stopped before uploading the log)');
          continue;
        }
        await this.loadURL(ctl, content, runId, name);
        return;
      }
      if (lastErr instanceof ApiError && lastErr.status === 404) {
        this.say('Run ' + runId + ' has no log artifact.');
      } else {
        this.say('No log: ', errorText(lastErr));
      }
    }

    async loadURL(ctl, content, runId, name) {
      if (content.storageType === 'error') {
        this.say('The worker could not upload ' + name + ': ' + (content.reason || '') + (content.message ? ' — ' + content.message : ''));
        return;
      }
      if (!content.url) {
        this.say('The log is stored as a ' + content.storageType + ' artifact, which this page cannot read.');
        return;
      }
      this.say('Loading ' + name + '…');
      try {
        const res = await fetch(content.url, { signal: ctl.signal, credentials: 'omit' });
        if (!res.ok) throw new Error('HTTP ' + res.status + ' from the artifact storage');
        const text = await res.text();
        if (!this.stillCurrent(ctl)) return;
        this.clear();
        this.write(text, true);
        this.say('Log of run ' + runId + ' (' + name + ', ' + fmtBytes(text.length) + ').');
        fill(this.tools, h('a', { href: artifactURL(this.taskId, runId, name), rel: 'noopener' }, 'download'));
      } catch (err) {
        if (!this.stillCurrent(ctl)) return;
        this.say('Could not read ' + name + ': ', errorText(err));
      }
    }

    // write appends text, without terminal colour codes, keeping the
    // view pinned to the bottom if it was there and the panel bounded.
    write(text, flush) {
      let s = this.carry + text;
      this.carry = '';
      const esc = s.lastIndexOf('\x1b');
      if (!flush && esc >= 0 && !/^\x1b\[[0-9;?]*[ -/]*[@-~]/.test(s.slice(esc))) {
        // An escape sequence split across chunks: finish it next time.
        this.carry = s.slice(esc);
        s = s.slice(0, esc);
      }
      s = s.replace(/\x1b\[[0-9;?]*[ -/]*[@-~]/g, '');
      if (!s) return;
      const pre = this.pre;
      const atBottom = pre.scrollHeight - pre.scrollTop - pre.clientHeight < 40;
      pre.appendChild(document.createTextNode(s));
      this.size += s.length;
      if (this.size > MAX_LOG_CHARS) {
        const all = pre.textContent;
        const keep = all.slice(all.length - MAX_LOG_CHARS / 2);
        fill(pre, document.createTextNode('[… earlier output omitted here; download the log for all of it …]\n' + keep));
        this.size = keep.length;
      }
      if (atBottom) pre.scrollTop = pre.scrollHeight;
    }
  }

  function sleep(ms, signal) {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      signal.addEventListener('abort', () => { clearTimeout(t); resolve(); }, { once: true });
    });
  }

  function fmtBytes(n) {
    if (n < 1024) return n + ' bytes';
    if (n < 1024 * 1024) return (n / 1024).toFixed(1) + ' KiB';
    return (n / 1024 / 1024).toFixed(1) + ' MiB';
  }

  // ---------------------------------------------------------------- group

  function groupView(view, groupId) {
    document.title = 'Group ' + groupId + ' · hopper';
    if (!SLUGID.test(groupId)) {
      render(crumbs(), h('h1', {}, 'Not a task group id'), errorBox(new Error('"' + groupId + '" is not a taskGroupId.')));
      return;
    }
    const info = h('div', {}, h('p', { class: 'loading' }, 'Loading…'));
    const summary = h('div', {});
    const list = h('div', {});
    let filterState = '';
    let filterText = '';
    let tasks = [];
    const input = h('input', { type: 'search', placeholder: 'Filter by name or taskId', class: 'filter', 'aria-label': 'Filter tasks',
      oninput: (e) => { filterText = e.target.value.trim().toLowerCase(); draw(); } });
    render(crumbs(h('span', {}, 'group ', h('span', { class: 'mono' }, groupId))),
      h('h1', {}, 'Task group ', h('span', { class: 'mono' }, groupId)), info, summary,
      section('Tasks', h('div', { class: 'filters' }, input), list));

    function draw() {
      const counts = Object.fromEntries(STATES.map((s) => [s, 0]));
      for (const t of tasks) counts[t.status.state] = (counts[t.status.state] || 0) + 1;
      const total = tasks.length;
      const done = counts.completed + counts.failed + counts.exception;
      const chips = BAR_ORDER.map((s) => h('button', {
        type: 'button', class: 'chip' + (filterState === s ? ' selected' : '') + (counts[s] ? '' : ' none'),
        'aria-pressed': filterState === s ? 'true' : 'false',
        onclick: () => { filterState = filterState === s ? '' : s; draw(); },
      }, badge(s), ' ', String(counts[s])));
      const bar = h('div', { class: 'progress', role: 'img', 'aria-label': done + ' of ' + total + ' resolved' },
        BAR_ORDER.filter((s) => counts[s]).map((s) => h('div', {
          class: 'seg seg-' + s, style: null, title: s + ': ' + counts[s], 'data-w': String(counts[s] / total),
        })));
      // Widths are set through the CSSOM, which the CSP allows (inline
      // style attributes it would not).
      for (const seg of bar.children) seg.style.width = (Number(seg.dataset.w) * 100).toFixed(3) + '%';
      fill(summary, h('section', { class: 'card' },
        h('div', { class: 'progress-head' }, h('strong', {}, done + ' / ' + total + ' resolved'),
          total ? muted(' (' + Math.round((100 * done) / total) + '%)') : null),
        bar, h('div', { class: 'chips' }, chips)));
      const shown = tasks.filter((t) => (!filterState || t.status.state === filterState) &&
        (!filterText || t.status.taskId.toLowerCase().includes(filterText) ||
          String((t.task.metadata || {}).name || '').toLowerCase().includes(filterText)));
      fill(list, table(['Name', 'State', 'Task', 'Runs', 'Started', 'Duration'], shown.map((t) => {
        const last = t.status.runs[t.status.runs.length - 1];
        return [h('a', { href: '#/task/' + t.status.taskId }, (t.task.metadata || {}).name || t.status.taskId), badge(t.status.state),
          h('span', { class: 'mono small' }, t.status.taskId), String(t.status.runs.length),
          last && last.started ? when(last.started) : muted('—'),
          last && last.started ? between(last.started, last.resolved) : muted('—')];
      }), total ? 'No task matches.' : 'The group has no tasks.'));
    }

    view.poll(3000, async () => {
      let res;
      try {
        res = await apiPages('/task-group/' + groupId + '/list', 'tasks', { signal: view.signal, max: MAX_GROUP_TASKS });
      } catch (err) {
        if (view.stopped) return false;
        fill(info, errorBox(err));
        return !(err instanceof ApiError && err.status === 404);
      }
      tasks = res.items.slice().sort((a, b) => String((a.task.metadata || {}).name || '').localeCompare(String((b.task.metadata || {}).name || '')) ||
        a.status.taskId.localeCompare(b.status.taskId));
      const g = res.page;
      fill(info, kv([
        ['Scheduler', h('span', { class: 'mono' }, g.schedulerId)],
        ['Sealed', g.sealed ? when(g.sealed) : 'no'],
        ['Expires', when(g.expires)],
        ['Size', String(tasks.length) + (res.more ? '+ (only the first ' + MAX_GROUP_TASKS + ' are shown)' : '')],
      ]));
      draw();
      const live = tasks.some((t) => !RESOLVED.has(t.status.state));
      if (!live) setRefresh('All tasks resolved · auto-refresh stopped');
      return live || tasks.length === 0;
    });
  }

  // ---------------------------------------------------------------- search

  // searchView goes to whatever the query names: a task (preferred when
  // the id is both, as for decision tasks), a task group, or a task queue.
  // Its own route (#/search/<query>) makes lookups linkable; the page it
  // lands on replaces the search in the history.
  async function searchView(view, raw) {
    const input = raw.trim();
    document.title = 'Search · hopper';
    const go = (hash) => { if (!view.stopped) location.replace(hash); };
    const fail = (msg) => render(crumbs(), h('h1', {}, 'Nothing found'), h('div', { class: 'error' }, msg));
    if (TASK_QUEUE_ID.test(input)) {
      go('#/queue/' + encodeURIComponent(input));
      return;
    }
    const m = SLUGID.test(input) ? [input] : input.match(SLUGID_ANYWHERE);
    if (!m) {
      fail('"' + input + '" is not a taskId, a taskGroupId or a task queue id (provisionerId/workerType).');
      return;
    }
    const id = m[0];
    render(h('p', { class: 'loading' }, 'Looking up ' + id + '…'));
    const found = async (path) => {
      try {
        await api(path, { signal: view.signal });
        return true;
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) return false;
        throw err;
      }
    };
    try {
      if (await found('/task/' + id + '/status')) { go('#/task/' + id); return; }
      if (await found('/task-group/' + id + '/list?limit=1')) { go('#/group/' + id); return; }
    } catch (err) {
      if (!view.stopped) render(crumbs(), h('h1', {}, 'Search failed'), errorBox(err));
      return;
    }
    if (!view.stopped) fail('No task or task group ' + id + ' exists (or it has expired).');
  }

  document.getElementById('search').addEventListener('submit', (e) => {
    e.preventDefault();
    const input = document.getElementById('search-input');
    const q = input.value.trim();
    if (!q) return;
    input.value = '';
    input.blur();
    location.hash = '#/search/' + encodeURIComponent(q);
  });
  window.addEventListener('hashchange', route);
  route();
})();
