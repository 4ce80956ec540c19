package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// authCLIEnvHelp tells where the client and role commands take their
// credentials from, the way Taskcluster's own tools do.
const authCLIEnvHelp = `The server and credentials come from TASKCLUSTER_ROOT_URL,
TASKCLUSTER_CLIENT_ID, TASKCLUSTER_ACCESS_TOKEN and (for temporary
credentials) TASKCLUSTER_CERTIFICATE.`

// authCLIClient builds an API client from the TASKCLUSTER_* variables.
func authCLIClient() (*tcclient.Client, error) {
	rootURL := os.Getenv("TASKCLUSTER_ROOT_URL")
	clientID, token := os.Getenv("TASKCLUSTER_CLIENT_ID"), os.Getenv("TASKCLUSTER_ACCESS_TOKEN")
	if clientID == "" && token == "" {
		// No credentials in the environment: those `hopper login` stored.
		stored, storedRoot, err := loadStoredCredentials(os.Getenv, rootURL, time.Now())
		if err != nil {
			return nil, err
		}
		if stored != nil {
			return &tcclient.Client{RootURL: storedRoot, Credentials: stored}, nil
		}
	}
	if rootURL == "" {
		return nil, errors.New("TASKCLUSTER_ROOT_URL is not set (the hopper server's root URL, e.g. http://127.0.0.1:8080)")
	}
	c := &tcclient.Client{RootURL: rootURL}
	switch {
	case clientID != "" && token != "":
		c.Credentials = &tcclient.Credentials{ClientID: clientID, AccessToken: token, Certificate: os.Getenv("TASKCLUSTER_CERTIFICATE")}
	case clientID != "" || token != "":
		return nil, errors.New("set both TASKCLUSTER_CLIENT_ID and TASKCLUSTER_ACCESS_TOKEN, or neither")
	}
	return c, nil
}

// signedIn tells whether the call used the credentials of `hopper login`
// (then a refusal is about their scopes, not missing credentials).
func signedIn() bool {
	stored, _, _ := loadStoredCredentials(os.Getenv, os.Getenv("TASKCLUSTER_ROOT_URL"), time.Now())
	return stored != nil
}

// authCLIError turns an API failure into what was being done, the status
// and code, and the server's explanation (tcclient.ErrorDigest): its first
// line, then, indented on the lines below, what to fix (the missing
// scopes, each schema violation).
func authCLIError(doing string, err error) error {
	var apiErr *tcclient.APIError
	if !errors.As(err, &apiErr) {
		// failure keeps only the innermost cause and says what to check.
		return failure(doing, err)
	}
	if (apiErr.StatusCode == http.StatusForbidden || apiErr.StatusCode == http.StatusUnauthorized) &&
		os.Getenv("TASKCLUSTER_CLIENT_ID") == "" && os.Getenv("TASKCLUSTER_ACCESS_TOKEN") == "" && !signedIn() {
		return withoutCredentials(&ExitError{Msg: doing, Err: err})
	}
	summary, details := tcclient.ErrorDigest(apiErr.Message)
	code := apiErr.Code
	if code == "" {
		code = "error"
	}
	line := fmt.Sprintf("%s: %d %s: %s", doing, apiErr.StatusCode, code, summary)
	if hint := hintFor(err); hint != "" {
		line += " (" + hint + ")"
	}
	return &ExitError{Code: ExitFailed, Msg: withDetails(line, details), Err: err}
}

// withDetails appends an error's detail lines below its first line.
func withDetails(line string, details []string) string {
	if len(details) == 0 {
		return line
	}
	return line + "\n" + strings.Join(details, "\n")
}

// parseClientExpiry reads --expires: an RFC 3339 date-time, or a duration from
// now in Go syntax extended with days and years ("90d", "1y", "36h").
func parseClientExpiry(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	unit := time.Duration(0)
	switch {
	case strings.HasSuffix(s, "d"):
		unit = 24 * time.Hour
	case strings.HasSuffix(s, "y"):
		unit = 365 * 24 * time.Hour
	}
	if unit != 0 {
		n, err := strconv.Atoi(strings.TrimSpace(s[:len(s)-1]))
		if err != nil || n <= 0 {
			return time.Time{}, fmt.Errorf("--expires %q: want a date-time, a duration or a number of days (d) or years (y)", s)
		}
		return now.Add(time.Duration(n) * unit), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("--expires %q: want a date-time, a duration or a number of days (d) or years (y)", s)
	}
	return now.Add(d), nil
}

// printAuthJSON prints v indented.
func printAuthJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// printReply prints an API reply: as its JSON with --json (asJSON), else
// as text writes it.
func printReply(cmd *cobra.Command, asJSON bool, v any, text func(io.Writer) error) error {
	if asJSON {
		return printAuthJSON(cmd.OutOrStdout(), v)
	}
	return text(cmd.OutOrStdout())
}

// printAuthClient prints a client for humans; a token (only present right
// after create or reset) is printed with a reminder that it is shown once.
func printAuthClient(w io.Writer, c *tcclient.AuthClient) error {
	t := newTable(w)
	t.row("clientId:", c.ClientID)
	if c.AccessToken != "" {
		t.row("accessToken:", c.AccessToken, "(shown only now: store it safely)")
	}
	state := "enabled"
	if c.Disabled {
		state = "disabled"
	}
	t.row("state:", state)
	t.row("description:", flattenText(c.Description))
	t.row("expires:", c.Expires)
	t.row("created:", c.Created)
	t.row("lastRotated:", c.LastRotated)
	if c.DeleteOnExpiration {
		t.row("deleteOnExpiration:", "true")
	}
	scopeRows(t, "scopes", c.Scopes)
	scopeRows(t, "expandedScopes", c.ExpandedScopes)
	return t.flush()
}

// scopeRows adds one scope a row under a label.
func scopeRows(t *table, label string, scopes []string) {
	if len(scopes) == 0 {
		t.row(label+":", "(none)")
		return
	}
	for i, s := range scopes {
		if i == 0 {
			t.row(label+":", s)
		} else {
			t.row("", s)
		}
	}
}

// flattenText flattens a (markdown) description for a table cell.
func flattenText(s string) string { return strings.Join(strings.Fields(s), " ") }

// NewClientCommand is `hopper client`: manage clients through the Auth API.
func NewClientCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "client",
		Short: "Manage clients: create, list, show, delete, reset-token, disable, enable",
		Long:  "Manage the clients stored by a hopper server (its Auth API).\n\n" + authCLIEnvHelp,
		Args:  cobra.NoArgs,
	}
	var asJSON bool
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print the API's JSON reply instead of text")
	show := clientActionCommand(&asJSON, "show", "Show a client and its expanded scopes", "getting client",
		func(c *tcclient.Client, cmd *cobra.Command, id string) (*tcclient.AuthClient, error) {
			return c.GetClient(cmd.Context(), id)
		})
	reset := clientActionCommand(&asJSON, "reset-token", "Give a client a new access token (the old one stops working) and print it", "resetting the access token of client",
		func(c *tcclient.Client, cmd *cobra.Command, id string) (*tcclient.AuthClient, error) {
			return c.ResetAccessToken(cmd.Context(), id)
		})
	disable := clientActionCommand(&asJSON, "disable", "Disable a client: its credentials stop working until it is enabled", "disabling client",
		func(c *tcclient.Client, cmd *cobra.Command, id string) (*tcclient.AuthClient, error) {
			return c.DisableClient(cmd.Context(), id)
		})
	enable := clientActionCommand(&asJSON, "enable", "Enable a disabled client", "enabling client",
		func(c *tcclient.Client, cmd *cobra.Command, id string) (*tcclient.AuthClient, error) {
			return c.EnableClient(cmd.Context(), id)
		})

	del := deleteCommand("client", "clientId", &asJSON, func(c *tcclient.Client, cmd *cobra.Command, id string) error {
		return c.DeleteClient(cmd.Context(), id)
	})
	cmd.AddCommand(clientCreateCommand(&asJSON), clientListCommand(&asJSON), show, del, reset, disable, enable)
	return cmd
}

// clientCreateCommand is `hopper client create`: prints the access token,
// shown only once.
func clientCreateCommand(asJSON *bool) *cobra.Command {
	var (
		scopes             []string
		description        string
		expires            string
		deleteOnExpiration bool
	)
	create := &cobra.Command{
		Use:   "create CLIENT_ID",
		Short: "Create a client and print its access token (shown only once)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			exp, err := parseClientExpiry(expires, time.Now())
			if err != nil {
				return err
			}
			if scopes == nil {
				scopes = []string{}
			}
			created, err := c.CreateClient(cmd.Context(), args[0], &tcclient.ClientRequest{
				Expires: tcclient.NewTime(exp), Description: description, Scopes: scopes, DeleteOnExpiration: deleteOnExpiration,
			})
			if err != nil {
				return authCLIError("creating client "+args[0], err)
			}
			if *asJSON {
				return printAuthJSON(cmd.OutOrStdout(), created)
			}
			return printAuthClient(cmd.OutOrStdout(), created)
		},
	}
	create.Flags().StringArrayVar(&scopes, "scope", nil, "scope of the client (repeat for several)")
	create.Flags().StringVar(&description, "description", "", "what the client is for and who owns it (required)")
	create.Flags().StringVar(&expires, "expires", "1y", "expiry: RFC 3339 date-time or a duration from now (90d, 1y, 36h)")
	create.Flags().BoolVar(&deleteOnExpiration, "delete-on-expiration", false, "let the server delete the client once it has expired")
	_ = create.MarkFlagRequired("description")
	return create
}

// clientListCommand is `hopper client list`.
func clientListCommand(asJSON *bool) *cobra.Command {
	var prefix string
	list := &cobra.Command{
		Use:   "list",
		Short: "List clients",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			clients, err := c.AllClients(cmd.Context(), prefix)
			if err != nil {
				return authCLIError("listing clients", err)
			}
			if clients == nil {
				clients = []tcclient.AuthClient{}
			}
			if *asJSON {
				return printAuthJSON(cmd.OutOrStdout(), clients)
			}
			t := newTable(cmd.OutOrStdout(), "CLIENT ID", "STATE", "EXPIRES", "SCOPES", "DESCRIPTION")
			for _, cl := range clients {
				state := "enabled"
				if cl.Disabled {
					state = "disabled"
				}
				t.row(cl.ClientID, state, cl.Expires, len(cl.Scopes), truncateCell(flattenText(cl.Description), 60))
			}
			return t.flush()
		},
	}
	list.Flags().StringVar(&prefix, "prefix", "", "only clients whose id starts with this")
	return list
}

// clientActionCommand is a one-argument `hopper client` command (use) that
// prints the client call acts on.
func clientActionCommand(asJSON *bool, use, short, doing string, call func(c *tcclient.Client, cmd *cobra.Command, id string) (*tcclient.AuthClient, error)) *cobra.Command {
	return &cobra.Command{
		Use:   use + " CLIENT_ID",
		Short: short,
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			cl, err := call(c, cmd, args[0])
			if err != nil {
				return authCLIError(doing+" "+args[0], err)
			}
			if *asJSON {
				return printAuthJSON(cmd.OutOrStdout(), cl)
			}
			return printAuthClient(cmd.OutOrStdout(), cl)
		},
	}
}

// truncateCell shortens s to at most n runes, marking the cut.
func truncateCell(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// deleteCommand is `<kind> delete ID`, shared by clients and roles: deleting
// an absent entity succeeds, as in Taskcluster.
func deleteCommand(kind, idKey string, asJSON *bool, del func(c *tcclient.Client, cmd *cobra.Command, id string) error) *cobra.Command {
	return &cobra.Command{
		Use:   "delete " + strings.ToUpper(kind) + "_ID",
		Short: "Delete a " + kind + " (succeeds if it does not exist)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			if err := del(c, cmd, args[0]); err != nil {
				return authCLIError("deleting "+kind+" "+args[0], err)
			}
			if *asJSON {
				return printAuthJSON(cmd.OutOrStdout(), map[string]string{idKey: args[0], "status": "deleted"})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted %s %s\n", kind, args[0])
			return nil
		},
	}
}
