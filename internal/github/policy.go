package github

// Pull-request policies (`policy.pullRequests`).
const (
	PolicyPublic             = "public"
	PolicyPublicRestricted   = "public_restricted"
	PolicyCollaborators      = "collaborators"
	PolicyCollaboratorsQuiet = "collaborators_quiet"
)

// Trusted reports whether a forge permission level lets a user start
// trusted work: write access or more. Gitea's collaborator check answers
// 404 even for the repository's owner, so trust is always read from the
// permission endpoint (admin, maintain, write, owner).
func Trusted(permission string) bool {
	switch permission {
	case "admin", "maintain", "write", "owner":
		return true
	}
	return false
}

// PullTrust says whether a pull request is trusted, as Taskcluster
// decides: its opener is trusted, and its head is a trusted user's or the
// base repository's own.
func PullTrust(openerTrusted, headTrusted, headIsBase bool) bool {
	return openerTrusted && (headTrusted || headIsBase)
}

// PullDecision is what an untrusted or trusted pull request leads to.
type PullDecision struct {
	// Run says whether tasks are created, with TasksFor.
	Run      bool
	TasksFor string
	// Comment says whether the pull request is told why nothing ran.
	Comment bool
}

// DecidePull applies the default branch's policy to a pull request
// event.
func DecidePull(policy string, trusted bool, action string) PullDecision {
	if trusted {
		return PullDecision{Run: true, TasksFor: TasksForPullRequest}
	}
	switch policy {
	case PolicyPublic:
		return PullDecision{Run: true, TasksFor: TasksForPullRequest}
	case PolicyPublicRestricted:
		return PullDecision{Run: true, TasksFor: TasksForPullRequestUntrusted}
	case PolicyCollaboratorsQuiet:
		return PullDecision{}
	}
	return PullDecision{Comment: action == "opened"}
}
