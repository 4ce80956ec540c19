// Package github holds the rules of hopper's forge integration, the
// counterpart of Taskcluster's github service: which webhook deliveries
// lead to work, the event a `.taskcluster.yml` is rendered against, the
// rendering itself (versions 0 and 1, through package jsone), the task
// defaults and roles Taskcluster applies, the pull-request and comment
// policies, and the state a build reports back to the forge.
//
// It is pure Go: no HTTP, no database, time passed in. GitHub, GitHub
// Enterprise, Gitea and Forgejo deliveries are translated at the edge
// (Classify) into one Event; everything after that sees only the Event.
//
// Gitea and Forgejo deliveries are normalised into GitHub's shape
// (normalise.go), so a `.taskcluster.yml` written for GitHub keeps
// working: the `tasks_for` values stay Taskcluster's (`github-push`, …),
// and the event gains `event.forge` saying which forge sent it and the
// action as that forge spelt it.
package github
