// The forge integration's builds (/api/github/v1/builds): every task
// group a push, pull request, comment or release created, by repository,
// with its state, its commit on the forge and its task group; and the
// deliveries that made no build because they ended in an error, each
// with a page of its own (the page an error status on the forge links
// to).
import { enc, get, listAll } from '../api';
import { buildState, buildsPath, deliveriesFor, deliveryHref, deliveryState, type Delivery } from '../builds';
import { Badge, Card, GroupLink, Kv, Loading, safeHref, useAsync } from '../components';
import { fmtTime } from '../format';
import { AccessError } from '../signin';

export interface Build {
  organization: string;
  repository: string;
  sha: string;
  state: string;
  taskGroupId: string;
  eventType: string;
  eventId: string;
  created: string;
  updated: string;
  pullRequestNumber?: number;
  host?: string;
  forgeUrl?: string;
}

export function GithubPage({ org, repo }: { org?: string; repo?: string }) {
  const builds = useAsync(() => listAll<Build>('github', buildsPath(org, repo), 'builds', 500), [org, repo]);
  const failed = useAsync(async () => deliveriesFor(await listAll<Delivery>('github', '/deliveries', 'deliveries', 200), org, repo), [org, repo]);
  const title = org ? (repo ? `${org}/${repo}` : org) : 'All repositories';
  return (
    <div>
      <h1>Builds: {title}</h1>
      <p class="crumbs"><a href="#/github">all</a>{org && <> <span class="sep">›</span> <a href={`#/github/${enc(org)}`}>{org}</a></>}
        {repo && <> <span class="sep">›</span> <a href={`#/github/${enc(org!)}/${enc(repo)}`}>{repo}</a></>}</p>
      {builds.loading && !builds.data && <Loading what="builds" />}
      <AccessError error={builds.error} what="the builds" />
      {failed.data && failed.data.length > 0 && (
        <Card title={`Deliveries that failed (${failed.data.length})`}>
          <table class="list failed-deliveries">
            <thead><tr><th>Received</th><th>Repository</th><th>Event</th><th>State</th><th>Error</th></tr></thead>
            <tbody>
              {failed.data.map((d) => (
                <tr key={`${d.host}/${d.deliveryId}`}>
                  <td><a href={deliveryHref(d)}>{fmtTime(d.received)}</a></td>
                  <td>{d.repository}</td>
                  <td>{d.event}</td>
                  <td><Badge state={deliveryState(d)} label={d.state === 'pending' ? 'retrying' : 'error'} /></td>
                  <td class="delivery-error">{d.error.split('\n')[0]}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </Card>
      )}
      {builds.data && (
        <Card title={`Builds (${builds.data.length})`}>
          {builds.data.length === 0 ? <p class="empty">None yet: a push to a repository whose webhook points at this hopper starts one.</p> : (
            <table class="list">
              <thead><tr><th>Repository</th><th>Commit</th><th>Pull request</th><th>Event</th><th>State</th><th>Task group</th><th>Updated</th></tr></thead>
              <tbody>
                {builds.data.map((b) => (
                  <tr key={b.taskGroupId}>
                    <td><a href={`#/github/${enc(b.organization)}/${enc(b.repository)}`}>{b.organization}/{b.repository}</a></td>
                    <td class="mono">{b.forgeUrl && safeHref(b.forgeUrl) ? <a href={safeHref(b.forgeUrl)} rel="noopener noreferrer">{b.sha.slice(0, 10)}</a> : b.sha.slice(0, 10)}</td>
                    <td>{b.pullRequestNumber ? `#${b.pullRequestNumber}` : ''}</td>
                    <td>{b.eventType}</td>
                    <td class="build-state"><Badge state={buildState(b.state)} label={b.state} /></td>
                    <td><GroupLink id={b.taskGroupId} /></td>
                    <td>{fmtTime(b.updated)}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </Card>
      )}
    </div>
  );
}

/** DeliveryPage is one delivery's record: what processing did, the whole error. */
export function DeliveryPage({ host, deliveryId }: { host: string; deliveryId: string }) {
  const d = useAsync(() => get<Delivery>('github', `/deliveries/${enc(host)}/${enc(deliveryId)}`), [host, deliveryId]);
  return (
    <div>
      <h1>Delivery <span class="mono">{deliveryId}</span></h1>
      <p class="crumbs"><a href="#/github">builds</a> <span class="sep">›</span> {host}</p>
      {d.loading && !d.data && <Loading what="the delivery" />}
      <AccessError error={d.error} what="this delivery" />
      {d.data && (
        <Card title={d.data.error ? 'What went wrong' : 'What it did'}>
          <Kv pairs={[
            ['Repository', d.data.repository],
            ['Event', d.data.event],
            ['Received', fmtTime(d.data.received)],
            ['State', d.data.state],
            ['Attempts', String(d.data.attempts)],
            ['Replays', d.data.replayOf ? <a href={deliveryHref({ host, deliveryId: d.data.replayOf })}>{d.data.replayOf}</a> : ''],
            ['Outcome', d.data.error ? '' : d.data.outcome],
          ]} />
          {d.data.error && <pre class="delivery-error">{d.data.error}</pre>}
        </Card>
      )}
    </div>
  );
}
