// The dependency graph of a group: columns by dependency depth, drawn in
// SVG, only the part in view (so 10,000 tasks scroll as smoothly as ten).
// A deep graph fits the width at first, scaled down as a whole (edges keep
// their routes and a visible stroke), and zooms in and out; nodes link to
// their tasks; the critical path is drawn bold.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { Card } from '../components';
import { count } from '../format';
import { GEOMETRY, LABEL_MIN_SCALE, criticalPath, edgePath, fitScale, layout, zoomStep, type Node } from '../graph';
import type { GroupMember } from '../types';

const { nodeW: NODE_W, nodeH: NODE_H, colW: COL_W, rowH: ROW_H, pad: PAD } = GEOMETRY;
const VIEW_H = 600;

export function Graph({ members }: { members: GroupMember[] }) {
  const g = useMemo(() => layout(members), [members]);
  const critical = useMemo(() => new Set(criticalPath(members, Date.now())), [members]);
  const box = useRef<HTMLDivElement>(null);
  const [view, setView] = useState({ left: 0, top: 0, width: 1200 });
  // 'fit' follows the container's width; a number is the user's zoom.
  const [zoom, setZoom] = useState<'fit' | number>('fit');
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const measure = () => setView((v) => (v.width === el.clientWidth ? v : { ...v, width: el.clientWidth }));
    measure();
    const watch = new ResizeObserver(measure);
    watch.observe(el);
    return () => watch.disconnect();
  }, []);
  // The last column ends at its nodes' right edge (plus padding), not at a
  // full column pitch.
  const width = Math.max(0, g.layers - 1) * COL_W + NODE_W + PAD * 2;
  const height = g.height * ROW_H + PAD * 2;
  // A few pixels short of the width, so rounding never adds a scroll bar.
  const fit = fitScale(width, view.width - 4);
  const scale = zoom === 'fit' ? fit : zoom;
  const x = (n: Node) => PAD + n.layer * COL_W;
  const y = (n: Node) => PAD + n.row * ROW_H;
  // What is in view, in the drawing's own (unscaled) units.
  const margin = 200;
  const left = view.left / scale, top = view.top / scale, right = (view.left + view.width) / scale, bottom = (view.top + VIEW_H) / scale;
  const inView = (n: Node) => x(n) + NODE_W >= left - margin && x(n) <= right + margin && y(n) + NODE_H >= top - margin && y(n) <= bottom + margin;
  const nodes = g.nodes.filter(inView);
  const edges = g.edges.filter(([a, b]) => inView(a) || inView(b));
  // Zooming keeps the middle of the view where it was.
  const zoomTo = (next: 'fit' | number) => {
    const el = box.current;
    const to = next === 'fit' ? fit : next;
    if (el) {
      const cx = (el.scrollLeft + el.clientWidth / 2) / scale, cy = (el.scrollTop + el.clientHeight / 2) / scale;
      requestAnimationFrame(() => {
        el.scrollLeft = Math.max(0, cx * to - el.clientWidth / 2);
        el.scrollTop = Math.max(0, cy * to - el.clientHeight / 2);
      });
    }
    setZoom(next);
  };
  const labels = scale >= LABEL_MIN_SCALE;
  return (
    <Card title={`Dependency graph: ${count(g.nodes.length, 'task')} in ${count(g.layers, 'level')}, ${count(g.edges.length, 'dependency', 'dependencies')}`}
      actions={<span class="zoom">
        <button type="button" data-zoom="out" title="Zoom out" onClick={() => zoomTo(zoomStep(scale, -1))}>−</button>
        <span class="zoom-level small" data-scale={scale.toFixed(3)}>{Math.round(scale * 100)}%</span>
        <button type="button" data-zoom="in" title="Zoom in" onClick={() => zoomTo(zoomStep(scale, 1))}>+</button>
        <button type="button" data-zoom="fit" class={zoom === 'fit' ? 'active' : ''} title="Fit the width" onClick={() => zoomTo('fit')}>Fit width</button>
        <button type="button" data-zoom="actual" title="Actual size" onClick={() => zoomTo(1)}>100%</button>
      </span>}>
      <p class="small muted">Columns are dependency depth within the group; the bold chain is the critical path (what the group's end waited for).
        {!labels && ' Names show from 45% (hover a task for its name).'}</p>
      <div class="graph" ref={box} style={{ height: `${Math.min(VIEW_H, height * scale + 20)}px` }} data-nodes={g.nodes.length} data-drawn={nodes.length}
        onWheel={(e) => {
          // Ctrl (or pinch, which browsers send as ctrl+wheel) zooms.
          if (!e.ctrlKey) return;
          e.preventDefault();
          zoomTo(zoomStep(scale, e.deltaY < 0 ? 1 : -1));
        }}
        onScroll={(e) => { const el = e.currentTarget as HTMLElement; setView({ left: el.scrollLeft, top: el.scrollTop, width: el.clientWidth }); }}>
        <svg width={width * scale} height={height * scale} viewBox={`0 0 ${width} ${height}`} class={labels ? '' : 'far'} role="img" aria-label="dependency graph">
          <g class="edges">
            {edges.map(([a, b]) => {
              const crit = critical.has(a.taskId) && critical.has(b.taskId);
              return <path key={`${a.taskId}>${b.taskId}`} class={crit ? 'edge critical' : 'edge'} d={edgePath(a, b)} />;
            })}
          </g>
          {nodes.map((n) => (
            <a key={n.taskId} href={`#/task/${n.taskId}`} class={`node state-${n.state}${critical.has(n.taskId) ? ' critical' : ''}`} data-task={n.taskId}>
              <title>{`${n.name} (${n.state})\n${n.taskId}`}</title>
              <rect x={x(n)} y={y(n)} width={NODE_W} height={NODE_H} rx={5} />
              {labels && <text x={x(n) + 8} y={y(n) + 17}>{n.name.length > 26 ? n.name.slice(0, 25) + '…' : n.name || n.taskId}</text>}
            </a>
          ))}
        </svg>
      </div>
    </Card>
  );
}
