package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// maxAuditPages bounds how many pages one `hopper audit` reads (entries
// are kept 30 days).
const maxAuditPages = 1000

// NewAuditCommand is `hopper audit`: the Auth service's audit log of
// clients and roles (getEntityHistory, listAuditHistory).
func NewAuditCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show the audit log of clients and roles: the changes of one, or those one client made",
		Long: `Show who changed a client or role, how and when (created, updated, deleted,
client enabled, client disabled, access token reset), oldest first, as the
Auth API keeps them (30 days). Needs auth:audit-history:<client|role> for
"client" and "role", auth:client-audit-history:<clientId> for "by".

` + authCLIEnvHelp,
		Args: cobra.NoArgs,
	}
	var asJSON bool
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print the entries as JSON (the API's auditHistory, every page)")
	entity := func(kind string) *cobra.Command {
		return &cobra.Command{
			Use:   kind + " " + map[string]string{"client": "CLIENT_ID", "role": "ROLE_ID"}[kind],
			Short: "The changes made to one " + kind,
			Args:  exactArgs(1),
			RunE: func(cmd *cobra.Command, args []string) error {
				return printAudit(cmd, asJSON, "getting the history of "+kind+" "+args[0], func(ctx context.Context, c *tcclient.Client, o tcclient.ListOptions) (*tcclient.AuditHistoryResponse, error) {
					return c.GetEntityHistory(ctx, kind, args[0], o)
				})
			},
		}
	}
	by := &cobra.Command{
		Use:   "by CLIENT_ID",
		Short: "The changes one client made to clients and roles",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return printAudit(cmd, asJSON, "listing the changes client "+args[0]+" made", func(ctx context.Context, c *tcclient.Client, o tcclient.ListOptions) (*tcclient.AuditHistoryResponse, error) {
				return c.ListAuditHistory(ctx, args[0], o)
			})
		},
	}
	cmd.AddCommand(entity("client"), entity("role"), by)
	return cmd
}

// printAudit reads every page of an audit history and prints it.
func printAudit(cmd *cobra.Command, asJSON bool, doing string, page func(context.Context, *tcclient.Client, tcclient.ListOptions) (*tcclient.AuditHistoryResponse, error)) error {
	c, err := authCLIClient()
	if err != nil {
		return err
	}
	entries := []tcclient.AuditEntry{}
	opts := tcclient.ListOptions{}
	for i := 0; ; i++ {
		if i == maxAuditPages {
			return &ExitError{Code: ExitFailed, Msg: fmt.Sprintf("%s: more than %d pages", doing, maxAuditPages)}
		}
		resp, err := page(cmd.Context(), c, opts)
		if err != nil {
			return authCLIError(doing, err)
		}
		entries = append(entries, resp.AuditHistory...)
		if resp.ContinuationToken == "" {
			break
		}
		opts.ContinuationToken = resp.ContinuationToken
	}
	if asJSON {
		return printAuthJSON(cmd.OutOrStdout(), map[string]any{"auditHistory": entries})
	}
	return renderAudit(cmd.OutOrStdout(), entries)
}

func renderAudit(w io.Writer, entries []tcclient.AuditEntry) error {
	if len(entries) == 0 {
		_, err := fmt.Fprintln(w, "No changes recorded (entries are kept 30 days).")
		return err
	}
	t := newTable(w, "WHEN", "WHO", "ACTION", "ENTITY")
	for _, e := range entries {
		t.row(e.Created.String(), e.ClientID, e.ActionType, e.EntityType+" "+e.EntityID)
	}
	return t.flush()
}
