// The forge integration's builds as the console shows them.

/** buildsPath is the builds query of a repository page (names escaped). */
export function buildsPath(org?: string, repo?: string): string {
  if (!org) return '/builds';
  return `/builds?organization=${encodeURIComponent(org)}` + (repo ? `&repository=${encodeURIComponent(repo)}` : '');
}

/** buildState maps a build's state onto the console's task states. */
export function buildState(state: string): string {
  return ({ success: 'completed', failure: 'failed', error: 'exception', cancelled: 'exception' } as Record<string, string>)[state] ?? state;
}

