package githubapi

import (
	"context"
	"fmt"
	"sort"
)

// SyncInstallations records where each GitHub App forge's App is
// installed, as Taskcluster's daily syncInstallations does: an
// `installation` delivery that never arrived (the App installed while
// hopper was down, or before its webhook pointed here) is made good.
// Accounts are only added or updated; an uninstall arrives as its own
// delivery. It returns how many installations it recorded.
func (s *Service) SyncInstallations(ctx context.Context) (int, error) {
	hosts := make([]string, 0, len(s.Forges))
	for h := range s.Forges {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	n := 0
	for _, h := range hosts {
		f := s.Forges[h]
		list, err := f.Installations(ctx)
		if err != nil {
			return n, fmt.Errorf("listing the App's installations on %s: %w", h, err)
		}
		for _, i := range list {
			if err := s.Store.PutGithubInstallation(ctx, h, i.Owner, i.ID); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}
