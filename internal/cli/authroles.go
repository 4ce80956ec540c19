package cli

import (
	"fmt"
	"io"
	"net/http"
	"slices"

	"github.com/spf13/cobra"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// printAuthRole prints a role for humans.
func printAuthRole(w io.Writer, r *tcclient.Role) error {
	t := newTable(w)
	t.row("roleId:", r.RoleID)
	t.row("description:", flattenText(r.Description))
	t.row("created:", r.Created)
	t.row("lastModified:", r.LastModified)
	scopeRows(t, "scopes", r.Scopes)
	scopeRows(t, "expandedScopes", r.ExpandedScopes)
	return t.flush()
}

// NewRoleCommand is `hopper role`: manage roles through the Auth API.
func NewRoleCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "role",
		Short: "Manage roles: create, list, show, delete",
		Long: `Manage the roles stored by a hopper server. A client holding
"assume:<roleId>" gets every scope of the role; a roleId ending in "*"
matches a whole family, and "<..>" in its scopes receives the matched rest.

` + authCLIEnvHelp,
		Args: cobra.NoArgs,
	}
	var asJSON bool
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print the API's JSON reply instead of text")

	var (
		scopes      []string
		description string
	)
	create := &cobra.Command{
		Use:   "create ROLE_ID",
		Short: "Create a role",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			role, err := c.CreateRole(cmd.Context(), args[0], &tcclient.RoleRequest{Scopes: scopes, Description: description})
			if tcclient.StatusCode(err) == http.StatusConflict {
				return &ExitError{Code: ExitFailed, Err: err, Msg: "creating role " + args[0] + ": it exists already, with other scopes or description " +
					"(change it with `hopper role update " + args[0] + " --add-scope …`, or see it with `hopper role show " + args[0] + "`)"}
			}
			if err != nil {
				return authCLIError("creating role "+args[0], err)
			}
			if asJSON {
				return printAuthJSON(cmd.OutOrStdout(), role)
			}
			return printAuthRole(cmd.OutOrStdout(), role)
		},
	}
	create.Flags().StringArrayVar(&scopes, "scope", nil, "scope the role grants (repeat for several)")
	create.Flags().StringVar(&description, "description", "", "what the role is for (required)")
	_ = create.MarkFlagRequired("description")

	list := &cobra.Command{
		Use:   "list",
		Short: "List roles",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			roles, err := c.ListRoles(cmd.Context())
			if err != nil {
				return authCLIError("listing roles", err)
			}
			if roles == nil {
				roles = []tcclient.Role{}
			}
			if asJSON {
				return printAuthJSON(cmd.OutOrStdout(), roles)
			}
			t := newTable(cmd.OutOrStdout(), "ROLE ID", "SCOPES", "DESCRIPTION")
			for _, r := range roles {
				t.row(r.RoleID, len(r.Scopes), truncateCell(flattenText(r.Description), 60))
			}
			return t.flush()
		},
	}

	show := &cobra.Command{
		Use:   "show ROLE_ID",
		Short: "Show a role and what it expands to",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			role, err := c.GetRole(cmd.Context(), args[0])
			if err != nil {
				return authCLIError("getting role "+args[0], err)
			}
			if asJSON {
				return printAuthJSON(cmd.OutOrStdout(), role)
			}
			return printAuthRole(cmd.OutOrStdout(), role)
		},
	}

	del := deleteCommand("role", "roleId", &asJSON, func(c *tcclient.Client, cmd *cobra.Command, id string) error {
		return c.DeleteRole(cmd.Context(), id)
	})
	cmd.AddCommand(create, roleUpdateCommand(&asJSON), list, show, del)
	return cmd
}

// roleUpdateCommand is `hopper role update`: change a role's description
// or scopes. --scope replaces the scopes; --add-scope and --remove-scope
// edit the role's current ones (read, then written back whole, as the
// Auth API's updateRole takes them).
func roleUpdateCommand(asJSON *bool) *cobra.Command {
	var (
		description           string
		scopes, adds, removes []string
	)
	cmd := &cobra.Command{
		Use:   "update ROLE_ID",
		Short: "Change a role's description or scopes (--scope replaces them, --add-scope/--remove-scope edit them)",
		Example: "  hopper role update hook-id:proj/nightly --add-scope queue:create-task:project:none\n" +
			"  hopper role update repo:github.com/org/app:* --remove-scope 'secrets:get:*' --description 'app CI'",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			if !f.Changed("description") && !f.Changed("scope") && len(adds) == 0 && len(removes) == 0 {
				return usagef("hopper role update needs --description, --scope, --add-scope or --remove-scope (see hopper role update --help)")
			}
			if f.Changed("scope") && (len(adds) > 0 || len(removes) > 0) {
				return usagef("--scope replaces the role's scopes; give it alone, or edit them with --add-scope/--remove-scope")
			}
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			id := args[0]
			role, err := c.GetRole(cmd.Context(), id)
			if err != nil {
				return authCLIError("getting role "+id, err)
			}
			for _, r := range removes {
				if !slices.Contains(role.Scopes, r) {
					return &ExitError{Code: ExitFailed, Msg: fmt.Sprintf("updating role %s: it has no scope %q to remove (hopper role show %s lists its scopes)", id, r, id)}
				}
			}
			req := &tcclient.RoleRequest{Description: role.Description, Scopes: role.Scopes}
			if f.Changed("description") {
				req.Description = description
			}
			if f.Changed("scope") {
				req.Scopes = scopes
			}
			req.Scopes = editScopes(req.Scopes, adds, removes)
			updated, err := c.UpdateRole(cmd.Context(), id, req)
			if err != nil {
				return authCLIError("updating role "+id, err)
			}
			if *asJSON {
				return printAuthJSON(cmd.OutOrStdout(), updated)
			}
			return printAuthRole(cmd.OutOrStdout(), updated)
		},
	}
	cmd.Flags().StringVar(&description, "description", "", "the role's new description")
	cmd.Flags().StringArrayVar(&scopes, "scope", nil, "the role's scopes, replacing the current ones (repeat for several)")
	cmd.Flags().StringArrayVar(&adds, "add-scope", nil, "a scope to add (repeat for several)")
	cmd.Flags().StringArrayVar(&removes, "remove-scope", nil, "a scope to remove, exactly as the role has it (repeat for several)")
	return cmd
}

// editScopes returns scopes without removes and with adds not already
// there, in order.
func editScopes(scopes, adds, removes []string) []string {
	out := []string{}
	have := map[string]bool{}
	for _, s := range scopes {
		if !slices.Contains(removes, s) && !have[s] {
			out = append(out, s)
			have[s] = true
		}
	}
	for _, s := range adds {
		if !have[s] {
			out = append(out, s)
			have[s] = true
		}
	}
	return out
}
