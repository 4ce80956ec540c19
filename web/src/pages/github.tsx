// The forge integration's builds (/api/github/v1/builds): every task
// group a push, pull request, comment or release created, by repository,
// with its state, its commit on the forge and its task group.
import { enc, listAll } from '../api';
import { buildState, buildsPath } from '../builds';
import { Badge, Card, ErrorBox, GroupLink, Loading, safeHref, useAsync } from '../components';
import { fmtTime } from '../format';

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
  const title = org ? (repo ? `${org}/${repo}` : org) : 'All repositories';
  return (
    <div>
      <h1>Builds: {title}</h1>
      <p class="crumbs"><a href="#/github">all</a>{org && <> <span class="sep">›</span> <a href={`#/github/${enc(org)}`}>{org}</a></>}
        {repo && <> <span class="sep">›</span> <a href={`#/github/${enc(org!)}/${enc(repo)}`}>{repo}</a></>}</p>
      {builds.loading && !builds.data && <Loading what="builds" />}
      <ErrorBox error={builds.error} />
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
                    <td><Badge state={buildState(b.state)} /> <span class="muted small">{b.state}</span></td>
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
