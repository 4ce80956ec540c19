package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// NewHookCommand is `hopper hook`: manage hooks through the Hooks API.
func NewHookCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hook",
		Short: "Manage hooks: create, update, show, list, trigger, fires, token, remove",
		Long: `Manage hooks: tasks created on a schedule (cron), by an API call, by a
webhook with a secret token, or by Pulse messages. A hook is defined in a
YAML or JSON file with metadata, task (a JSON-e template), and optionally
schedule, triggerSchema and bindings. Its tasks get the scopes of the role
hook-id:<hookGroupId>/<hookId>.

` + authCLIEnvHelp,
		Args: cobra.NoArgs,
	}
	var asJSON bool
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print the API's JSON reply instead of text")
	create := hookDefineCommand(&asJSON, "create", func(c *tcclient.Client, ctx context.Context, g, h string, d *tcclient.Hook) (*tcclient.Hook, error) {
		return c.CreateHook(ctx, g, h, d)
	})
	update := hookDefineCommand(&asJSON, "update", func(c *tcclient.Client, ctx context.Context, g, h string, d *tcclient.Hook) (*tcclient.Hook, error) {
		return c.UpdateHook(ctx, g, h, d)
	})
	cmd.AddCommand(create, update, hookShowCommand(&asJSON), hookListCommand(&asJSON), hookTriggerCommand(&asJSON),
		hookFiresCommand(&asJSON), hookTokenCommand(&asJSON), hookRemoveCommand(&asJSON))
	return cmd
}

// hookDefineCommand is `hopper hook create` or `update` (verb), which
// send the hook read from a file through call.
func hookDefineCommand(asJSON *bool, verb string, call func(c *tcclient.Client, ctx context.Context, group, id string, def *tcclient.Hook) (*tcclient.Hook, error)) *cobra.Command {
	var file string
	c := &cobra.Command{
		Use:   verb + " HOOK_GROUP_ID HOOK_ID -f FILE",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " a hook from a YAML or JSON file (- reads standard input)",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			def, err := readHookFile(file, cmd.InOrStdin())
			if err != nil {
				return err
			}
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			hook, err := call(c, cmd.Context(), args[0], args[1], def)
			if err != nil {
				return authCLIError(verb+" hook "+args[0]+"/"+args[1], err)
			}
			return printReply(cmd, *asJSON, hook, func(w io.Writer) error { return printHook(w, hook, nil) })
		},
	}
	c.Flags().StringVarP(&file, "file", "f", "", "the hook definition (YAML or JSON; - for standard input)")
	_ = c.MarkFlagRequired("file")
	return c
}

// hookShowCommand is `hopper hook show`.
func hookShowCommand(asJSON *bool) *cobra.Command {
	return &cobra.Command{
		Use:   "show HOOK_GROUP_ID HOOK_ID",
		Short: "Show a hook with its next due time and last fire",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			hook, err := c.GetHook(cmd.Context(), args[0], args[1])
			if err != nil {
				return authCLIError("getting hook "+args[0]+"/"+args[1], err)
			}
			status, err := c.GetHookStatus(cmd.Context(), args[0], args[1])
			if err != nil {
				return authCLIError("getting the status of hook "+args[0]+"/"+args[1], err)
			}
			return printReply(cmd, *asJSON, map[string]any{"hook": hook, "status": status}, func(w io.Writer) error { return printHook(w, hook, status) })
		},
	}
}

// hookListCommand is `hopper hook list`: the groups, or one group's hooks.
func hookListCommand(asJSON *bool) *cobra.Command {
	return &cobra.Command{
		Use:   "list [HOOK_GROUP_ID]",
		Short: "List hook groups, or the hooks of a group with their schedules",
		Args:  atMostArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			if len(args) == 0 {
				groups, err := c.ListHookGroups(cmd.Context())
				if err != nil {
					return authCLIError("listing hook groups", err)
				}
				return printReply(cmd, *asJSON, map[string]any{"groups": nonNilList(groups)}, func(w io.Writer) error {
					for _, g := range groups {
						fmt.Fprintln(w, g)
					}
					return nil
				})
			}
			hooks, err := c.ListHooks(cmd.Context(), args[0])
			if err != nil {
				return authCLIError("listing the hooks of "+args[0], err)
			}
			return printReply(cmd, *asJSON, map[string]any{"hooks": hooks}, func(w io.Writer) error {
				t := newTable(w, "HOOK ID", "SCHEDULE", "NAME")
				for _, h := range hooks {
					t.row(h.HookID, scheduleText(h.Schedule), truncateCell(hookName(h.Metadata), 50))
				}
				return t.flush()
			})
		},
	}
}

// hookTriggerCommand is `hopper hook trigger`.
func hookTriggerCommand(asJSON *bool) *cobra.Command {
	var payloadFile string
	trigger := &cobra.Command{
		Use:   "trigger HOOK_GROUP_ID HOOK_ID [-p PAYLOAD]",
		Short: "Fire a hook now, with a payload (YAML or JSON; default {})",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			payload := map[string]any{}
			if payloadFile != "" {
				data, name, err := readPayloadArg(payloadFile, cmd.InOrStdin())
				if err != nil {
					return err
				}
				if payload, err = parseDocument(name, data, "a trigger payload"); err != nil {
					return err
				}
			}
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			res, err := c.TriggerHook(cmd.Context(), args[0], args[1], payload)
			if err != nil {
				return authCLIError("triggering hook "+args[0]+"/"+args[1], err)
			}
			return printReply(cmd, *asJSON, res, func(w io.Writer) error {
				if res.TaskID == "" {
					_, err := fmt.Fprintln(w, "the hook's template created no task (it rendered to null)")
					return err
				}
				_, err := fmt.Fprintln(w, res.TaskID)
				return err
			})
		},
	}
	trigger.Flags().StringVarP(&payloadFile, "payload", "p", "", `the payload: inline JSON ('{"version": 3}'), @FILE or a file name (YAML or JSON), or - for standard input`)
	return trigger
}

// hookFiresCommand is `hopper hook fires`.
func hookFiresCommand(asJSON *bool) *cobra.Command {
	return &cobra.Command{
		Use:   "fires HOOK_GROUP_ID HOOK_ID",
		Short: "List a hook's fires, newest first, with the state of each task",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			list, err := c.AllLastFires(cmd.Context(), args[0], args[1])
			if err != nil {
				return authCLIError("listing the fires of hook "+args[0]+"/"+args[1], err)
			}
			if list == nil {
				list = []tcclient.HookFire{} // --json: [], not null
			}
			return printReply(cmd, *asJSON, map[string]any{"lastFires": list}, func(w io.Writer) error {
				if len(list) == 0 {
					_, err := fmt.Fprintf(w, "hook %s/%s has not fired yet\n", args[0], args[1])
					return err
				}
				t := newTable(w, "TIME", "FIRED BY", "TASK ID", "RESULT", "TASK STATE", "ERROR")
				for _, f := range list {
					t.row(f.TaskCreateTime, f.FiredBy, f.TaskID, f.Result, f.TaskState, truncateCell(flattenText(f.Error), 60))
				}
				return t.flush()
			})
		},
	}
}

// hookRemoveCommand is `hopper hook remove`.
func hookRemoveCommand(asJSON *bool) *cobra.Command {
	return &cobra.Command{
		Use:   "remove HOOK_GROUP_ID HOOK_ID",
		Short: "Remove a hook and its record of fires (succeeds if it does not exist)",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			if err := c.RemoveHook(cmd.Context(), args[0], args[1]); err != nil {
				return authCLIError("removing hook "+args[0]+"/"+args[1], err)
			}
			reply := map[string]string{"hookGroupId": args[0], "hookId": args[1], "status": "removed"}
			return printReply(cmd, *asJSON, reply, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "removed hook %s/%s\n", args[0], args[1])
				return err
			})
		},
	}
}

// hookTokenCommand is `hopper hook token`: the hook's webhook URL.
func hookTokenCommand(asJSON *bool) *cobra.Command {
	var reset bool
	token := &cobra.Command{
		Use:   "token HOOK_GROUP_ID HOOK_ID [--reset]",
		Short: "Print the hook's webhook URL, which fires it with the JSON body POSTed to it (--reset: a new token first)",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			tok, err := c.GetTriggerToken(cmd.Context(), args[0], args[1], reset)
			if err != nil {
				return authCLIError("getting the trigger token of hook "+args[0]+"/"+args[1], err)
			}
			webhook := c.HooksBaseURL() + "/hooks/" + tcclient.EscapePathParam(args[0]) + "/" + tcclient.EscapePathParam(args[1]) +
				"/trigger/" + tcclient.EscapePathParam(tok.Token)
			return printReply(cmd, *asJSON, map[string]string{"token": tok.Token, "url": webhook}, func(w io.Writer) error {
				_, err := fmt.Fprintln(w, webhook)
				return err
			})
		},
	}
	token.Flags().BoolVar(&reset, "reset", false, "replace the token first, so the URL handed out before stops working")
	return token
}

// readPayloadArg reads a payload given on the command line: inline JSON
// (anything that starts with "{"), "@FILE" or a file name, or "-" for
// standard input.
func readPayloadArg(arg string, stdin io.Reader) ([]byte, string, error) {
	switch trimmed := strings.TrimSpace(arg); {
	case strings.HasPrefix(trimmed, "{"):
		return []byte(trimmed), "the --payload argument", nil
	case strings.HasPrefix(arg, "@"):
		return readInput(strings.TrimPrefix(arg, "@"), stdin)
	}
	data, name, err := readInput(arg, stdin)
	if err != nil {
		return nil, "", usagef("%v (give inline JSON such as '{\"key\": 1}', @FILE, or - for standard input)", err)
	}
	return data, name, nil
}

// readInput reads a file, or standard input for "-".
func readInput(path string, stdin io.Reader) ([]byte, string, error) {
	if path == "-" {
		data, err := io.ReadAll(stdin)
		return data, "standard input", err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", usagef("reading %s: %v", path, err)
	}
	return data, displayName(path), nil
}

// parseDocument decodes a YAML or JSON mapping; what says what it should
// be in errors.
func parseDocument(name string, data []byte, what string) (map[string]any, error) {
	trimmed := bytes.TrimSpace(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")))
	if len(trimmed) == 0 {
		return nil, usagef("%s is empty: expected %s in YAML or JSON", name, what)
	}
	var (
		doc any
		err error
	)
	if trimmed[0] == '{' {
		if doc, err = parseJSON(trimmed); err != nil {
			return nil, usagef("%s: invalid JSON: %v", name, err)
		}
	} else if doc, err = parseYAML(trimmed); err != nil {
		return nil, usagef("%s: invalid YAML: %v", name, err)
	}
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, usagef("%s: %s must be a mapping (object), not %s", name, what, kindOf(doc))
	}
	return m, nil
}

// readHookFile reads a hook definition.
func readHookFile(path string, stdin io.Reader) (*tcclient.Hook, error) {
	data, name, err := readInput(path, stdin)
	if err != nil {
		return nil, err
	}
	doc, err := parseDocument(name, data, "a hook definition")
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", name, err)
	}
	var def tcclient.Hook
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&def); err != nil {
		return nil, usagef("%s: not a hook definition: %v", name, err)
	}
	if len(def.Task) == 0 || len(def.Metadata) == 0 {
		return nil, usagef("%s: a hook definition needs metadata and task", name)
	}
	return &def, nil
}

// printHook prints a hook for humans, with its status when known.
func printHook(w io.Writer, h *tcclient.Hook, status *tcclient.HookStatus) error {
	t := newTable(w)
	t.row("hook:", h.HookGroupID+"/"+h.HookID)
	t.row("name:", hookName(h.Metadata))
	t.row("schedule:", scheduleText(h.Schedule))
	if len(h.Bindings) > 0 && string(h.Bindings) != "[]" {
		t.row("bindings:", string(h.Bindings))
	}
	if status != nil {
		if status.NextScheduledDate != "" {
			t.row("next fire:", status.NextScheduledDate)
		}
		t.row("last fire:", lastFireText(status.LastFire))
	}
	if err := t.flush(); err != nil {
		return err
	}
	var task bytes.Buffer
	if err := json.Indent(&task, h.Task, "  ", "  "); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "task template:\n  %s\n", task.String())
	return err
}

func scheduleText(schedule []string) string {
	if len(schedule) == 0 {
		return "(none: fired by triggers only)"
	}
	return strings.Join(schedule, "; ")
}

func hookName(metadata json.RawMessage) string {
	var m struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(metadata, &m)
	return m.Name
}

func lastFireText(f map[string]any) string {
	switch f["result"] {
	case "success":
		return fmt.Sprintf("%v created task %v", f["time"], f["taskId"])
	case "error":
		msg := ""
		if e, ok := f["error"].(map[string]any); ok {
			msg, _ = e["message"].(string)
		}
		msg, _, _ = strings.Cut(msg, "\n\n---")
		return fmt.Sprintf("%v failed: %s", f["time"], truncateCell(flattenText(msg), 100))
	}
	return "never fired"
}

func nonNilList(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
