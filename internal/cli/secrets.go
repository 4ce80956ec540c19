package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// NewSecretCommand is `hopper secret`: manage secrets through the Secrets
// API. Values are read from a file or standard input, never from the
// command line, where they would land in shell history and process lists.
func NewSecretCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secret",
		Short: "Manage secrets: set, get, list, remove",
		Long: `Manage the secrets stored by a hopper server. A secret is a JSON object
kept sealed with the server key until it expires; reading one needs
"secrets:get:<name>", changing one "secrets:set:<name>". Tasks read them
through the worker's proxy ($TASKCLUSTER_PROXY_URL/api/secrets/v1/secret/<name>)
within the task's scopes.

` + authCLIEnvHelp,
		Args: cobra.NoArgs,
	}
	var asJSON bool
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print the API's JSON reply instead of text")
	cmd.AddCommand(secretSetCommand(&asJSON), secretGetCommand(&asJSON), secretListCommand(&asJSON), secretRemoveCommand(&asJSON))
	return cmd
}

// secretSetCommand is `hopper secret set`: the value read from a file or
// standard input.
func secretSetCommand(asJSON *bool) *cobra.Command {
	var file, key, expires string
	set := &cobra.Command{
		Use:   "set NAME",
		Short: "Create or replace a secret, its value read from --file or standard input",
		Long: `Create or replace a secret. The value is a JSON object read from --file
(or standard input when --file is "-" or not given); with --key the input
is taken as text and stored as {"<key>": "<text>"} (one trailing newline
dropped).`,
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			value, err := readSecretValue(cmd.InOrStdin(), file, key)
			if err != nil {
				return err
			}
			until, err := parseClientExpiry(expires, time.Now())
			if err != nil {
				return usagef("%v", err)
			}
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			if err := c.SetSecret(cmd.Context(), args[0], &tcclient.Secret{Secret: value, Expires: tcclient.NewTime(until)}); err != nil {
				return authCLIError("setting secret "+args[0], err)
			}
			if *asJSON {
				return printAuthJSON(cmd.OutOrStdout(), map[string]string{"name": args[0], "expires": tcclient.NewTime(until).String()})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "secret %s set (expires %s)\n", args[0], tcclient.NewTime(until))
			return nil
		},
	}
	set.Flags().StringVar(&file, "file", "-", `file holding the value ("-": standard input)`)
	set.Flags().StringVar(&key, "key", "", `store the input as text under this key: {"<key>": "<text>"}`)
	set.Flags().StringVar(&expires, "expires", "1y", "when the secret expires: a date-time or a duration from now (90d, 1y, 36h)")
	return set
}

// secretGetCommand is `hopper secret get`.
func secretGetCommand(asJSON *bool) *cobra.Command {
	return &cobra.Command{
		Use:   "get NAME",
		Short: "Print a secret's value (with --json, also its expiry)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			s, err := c.GetSecret(cmd.Context(), args[0])
			if err != nil {
				return authCLIError("getting secret "+args[0], err)
			}
			if *asJSON {
				return printAuthJSON(cmd.OutOrStdout(), s)
			}
			var out bytes.Buffer
			if err := json.Indent(&out, s.Secret, "", "  "); err != nil {
				return fmt.Errorf("getting secret %s: the reply is not JSON: %w", args[0], err)
			}
			out.WriteByte('\n')
			_, err = cmd.OutOrStdout().Write(out.Bytes())
			return err
		},
	}
}

// secretListCommand is `hopper secret list`: names, never values.
func secretListCommand(asJSON *bool) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the names of the secrets (never their values)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			names, err := c.AllSecrets(cmd.Context())
			if err != nil {
				return authCLIError("listing secrets", err)
			}
			if names == nil {
				names = []string{} // prints as [] in JSON, not null
			}
			if *asJSON {
				return printAuthJSON(cmd.OutOrStdout(), map[string][]string{"secrets": names})
			}
			for _, n := range names {
				fmt.Fprintln(cmd.OutOrStdout(), n)
			}
			return nil
		},
	}
}

// secretRemoveCommand is `hopper secret remove`.
func secretRemoveCommand(asJSON *bool) *cobra.Command {
	return &cobra.Command{
		Use:   "remove NAME",
		Short: "Delete a secret (succeeds if it does not exist)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			if err := c.RemoveSecret(cmd.Context(), args[0]); err != nil {
				return authCLIError("removing secret "+args[0], err)
			}
			if *asJSON {
				return printAuthJSON(cmd.OutOrStdout(), map[string]string{"name": args[0], "status": "removed"})
			}
			fmt.Fprintf(cmd.OutOrStdout(), "secret %s removed\n", args[0])
			return nil
		},
	}
}

// maxSecretInput bounds what `secret set` reads (the API's body limit is
// 10 MiB; secrets are small).
const maxSecretInput = 1 << 20

// readSecretValue reads the value of `secret set`: a JSON object, or text
// stored under key. Errors never quote the input.
func readSecretValue(stdin io.Reader, file, key string) (json.RawMessage, error) {
	var r io.Reader = stdin
	if file != "-" && file != "" {
		f, err := os.Open(file)
		if err != nil {
			return nil, usagef("reading the secret's value: %v", err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxSecretInput+1))
	if err != nil {
		return nil, fmt.Errorf("reading the secret's value: %w", err)
	}
	if len(data) > maxSecretInput {
		return nil, usagef("the secret's value is larger than %d bytes", maxSecretInput)
	}
	if key != "" {
		text := string(bytes.TrimSuffix(bytes.TrimSuffix(data, []byte("\n")), []byte("\r")))
		return json.Marshal(map[string]string{key: text})
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed) {
		return nil, usagef("the secret's value must be a JSON object (use --key NAME to store text as {\"NAME\": \"<text>\"})")
	}
	return trimmed, nil
}
