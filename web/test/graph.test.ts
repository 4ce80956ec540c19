import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bars, criticalPath, layout } from '../src/graph';
import type { GroupMember, Run } from '../src/types';

const t = (s: number) => new Date(Date.UTC(2030, 0, 1, 0, 0, s)).toISOString();

function member(taskId: string, deps: string[], runs: Partial<Run>[] = [], state = 'completed'): GroupMember {
  return {
    task: { dependencies: deps, created: t(0), deadline: t(3600), payload: {}, metadata: { name: taskId, description: '', owner: '', source: '' } },
    status: { taskId, state, runs: runs.map((r, i) => ({ runId: i, state: 'completed', reasonCreated: 'scheduled', scheduled: t(0), ...r })) } as GroupMember['status'],
  };
}

test('layout puts each task one column after its deepest dependency in the group', () => {
  const g = layout([
    member('a', []), member('b', ['a']), member('c', ['a', 'b']), member('d', ['outside']), member('e', ['c', 'd']),
  ]);
  const col = Object.fromEntries(g.nodes.map((n) => [n.taskId, n.layer]));
  assert.deepEqual(col, { a: 0, b: 1, c: 2, d: 0, e: 3 });
  assert.equal(g.layers, 4);
  assert.equal(g.height, 2);
  assert.equal(g.edges.length, 5, 'the dependency outside the group draws no edge');
});

test('layout handles a 10,000-task chain without recursion', () => {
  const ms: GroupMember[] = [];
  for (let i = 0; i < 10000; i++) ms.push(member(`t${i}`, i ? [`t${i - 1}`] : []));
  const g = layout(ms);
  assert.equal(g.layers, 10000);
  assert.equal(g.byId.get('t9999')!.layer, 9999);
});

test('critical path follows the dependency that finished last', () => {
  const ms = [
    member('decision', [], [{ started: t(0), resolved: t(10) }]),
    member('fast', ['decision'], [{ started: t(10), resolved: t(20) }]),
    member('slow', ['decision'], [{ started: t(10), resolved: t(50) }]),
    member('package', ['fast', 'slow'], [{ started: t(50), resolved: t(60) }]),
    member('unrelated', [], [{ started: t(0), resolved: t(5) }]),
  ];
  assert.deepEqual(criticalPath(ms, Date.parse(t(100))), ['decision', 'slow', 'package']);
});

test('bars are runs, earliest first, open runs end now', () => {
  const now = Date.parse(t(100));
  const b = bars([member('x', [], [{ started: t(30) }], 'running'), member('y', [], [{ started: t(5), resolved: t(8) }])], now);
  assert.deepEqual(b.map((r) => [r.taskId, r.open]), [['y', false], ['x', true]]);
  assert.equal(b[1].end, now);
});

test('the timeline axis ticks at round steps, each label where its tick is', async () => {
  const { axisTicks } = await import('../src/graph');
  assert.deepEqual(axisTicks(2300), [0, 500, 1000, 1500, 2000]);
  assert.deepEqual(axisTicks(7 * 60e3 + 5e3), [0, 120e3, 240e3, 360e3]);
  assert.deepEqual(axisTicks(50 * 60e3), [0, 600e3, 1200e3, 1800e3, 2400e3, 3000e3]);
  assert.deepEqual(axisTicks(1000), [0, 200, 400, 600, 800, 1000]);
  for (const span of [1, 999, 61e3, 3.7 * 3600e3, 9 * 86400e3, 40 * 86400e3]) {
    const ticks = axisTicks(span);
    assert.ok(ticks.length >= 1 && ticks.length <= 6, `${span}: ${ticks}`);
    assert.ok(ticks[ticks.length - 1] <= span);
  }
});

test('the list of a group sorts by pipeline order, state and duration', async () => {
  const { sortMembers } = await import('../src/graph');
  const run = (state: string, started?: string, resolved?: string) => ({ runId: 0, state, reasonCreated: 'scheduled', scheduled: '2030-01-01T00:00:00.000Z', started, resolved });
  const m = (id: string, name: string, state: string, deps: string[], r?: ReturnType<typeof run>) => ({
    status: { taskId: id, state, runs: r ? [r] : [] }, task: { metadata: { name }, dependencies: deps },
  }) as unknown as GroupMember;
  const members = [
    m('d', 'publish', 'unscheduled', ['c']),
    m('c', 'test', 'failed', ['a'], run('failed', '2030-01-01T00:00:10.000Z', '2030-01-01T00:00:40.000Z')),
    m('b', 'lint', 'completed', ['a'], run('completed', '2030-01-01T00:00:10.000Z', '2030-01-01T00:00:15.000Z')),
    m('a', 'build', 'running', [], run('running', '2030-01-01T00:00:00.000Z')),
  ];
  const now = Date.parse('2030-01-01T00:01:00.000Z');
  const names = (by: 'pipeline' | 'state' | 'duration') => sortMembers(members, by, now).map((x) => x.task.metadata.name);
  assert.deepEqual(names('pipeline'), ['build', 'lint', 'test', 'publish']);
  assert.deepEqual(names('state'), ['test', 'build', 'publish', 'lint']);
  assert.deepEqual(names('duration'), ['build', 'test', 'lint', 'publish']);
});

test('an edge that skips columns runs between rows, never behind a node', async () => {
  const { edgePath, GEOMETRY: g, nodeBox } = await import('../src/graph');
  const node = (layer: number, row: number) => ({ taskId: `${layer}/${row}`, name: '', state: 'completed', layer, row, deps: [] });
  // Neighbouring columns: one curve in the gap between them.
  assert.match(edgePath(node(0, 0), node(1, 2)), /^M202,25 C232,25 232,93 262,93$/);
  for (const [a, b] of [[node(0, 0), node(3, 0)], [node(0, 2), node(4, 5)], [node(1, 4), node(3, 1)]]) {
    const d = edgePath(a, b);
    const lane = Number(/ L[\d.]+,([\d.]+)/.exec(d)![1]);
    // The lane is in a gap between rows: inside no node's height.
    for (let row = 0; row < 10; row++) {
      const top = nodeBox(node(0, row)).y;
      assert.ok(lane <= top || lane >= top + g.nodeH, `${d}: lane ${lane} crosses row ${row}`);
    }
    // It turns only in the gaps between columns.
    const xs = [...d.matchAll(/(-?[\d.]+),(-?[\d.]+)/g)].map((m) => Number(m[1]));
    for (const x of xs) {
      const col = Math.floor((x - g.pad) / g.colW);
      const inNode = x > g.pad + col * g.colW && x < g.pad + col * g.colW + g.nodeW;
      assert.ok(!inNode || col === a.layer || col === b.layer, `${d}: x ${x} inside column ${col}`);
    }
  }
});

test('a deep graph fits the width; a shallow one keeps its size', async () => {
  const { fitScale, ZOOM } = await import('../src/graph');
  assert.equal(fitScale(800, 1200), 1, 'never enlarged');
  assert.equal(fitScale(2400, 1200), 0.5);
  assert.equal(fitScale(1e7, 1200), ZOOM.min, 'never below the smallest scale: deeper, it scrolls');
  assert.equal(fitScale(0, 1200), 1);
  assert.equal(fitScale(2400, 0), 1, 'not measured yet');
});

test('zooming steps through round scales from wherever it is', async () => {
  const { zoomStep } = await import('../src/graph');
  assert.equal(zoomStep(1, 1), 1.5);
  assert.equal(zoomStep(1, -1), 0.75);
  assert.equal(zoomStep(0.31, 1), 0.5, 'from a fitted scale to the next step up');
  assert.equal(zoomStep(0.31, -1), 0.25);
  assert.equal(zoomStep(2, 1), 2, 'the largest stays');
  assert.equal(zoomStep(0.03, -1), 0.03, 'below the smallest step stays');
});
