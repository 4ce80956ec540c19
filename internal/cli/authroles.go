package cli

import (
	"io"

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
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			role, err := c.CreateRole(cmd.Context(), args[0], &tcclient.RoleRequest{Scopes: scopes, Description: description})
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
		Args:  cobra.ExactArgs(1),
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
	cmd.AddCommand(create, list, show, del)
	return cmd
}
