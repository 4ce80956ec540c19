package cli

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/hopper-ci/hopper/internal/tcclient"
)

// NewNotifyCommand is `hopper notify`: check the notification channels
// and read what a task's notify routes produced, through the Notify API.
func NewNotifyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "notify",
		Short: "Notifications: send a test message, list a task's notifications",
		Long: `Notifications (docs/notify.md): send a test message through a channel to
check the server's configuration, or list what a task's notify.* routes
produced and what became of each.

` + authCLIEnvHelp,
		Args: cobra.NoArgs,
	}
	var (
		asJSON bool
		wait   time.Duration
	)
	cmd.PersistentFlags().BoolVar(&asJSON, "json", false, "print JSON instead of text")

	test := &cobra.Command{
		Use:   "test CHANNEL TARGET",
		Short: "Send a test message and wait until it is sent or fails",
		Long: `Send a test message through a channel and wait for its outcome:
  email ADDRESS           (scope notify:email:<address>)
  slack CHANNEL_ID        (notify:slack-channel:<channelId>)
  matrix ROOM_ID          (notify:matrix-room:<roomId>)
  pulse ROUTING_KEY       (notify:pulse:<routingKey>)
  webhook NAME            (notify:webhook:<name>)
It exits 0 once the server has sent it, 1 if it failed (with the reason).`,
		Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			method, body, err := testMessage(args[0], args[1], time.Now())
			if err != nil {
				return err
			}
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			id, _, err := c.SendNotification(ctx, method, body)
			if err != nil {
				return authCLIError("sending a test "+args[0]+" message", err)
			}
			n, err := waitForNotification(ctx, c, id, wait)
			if err != nil {
				return failure("waiting for the test message", err)
			}
			if asJSON {
				if err := printAuthJSON(cmd.OutOrStdout(), n); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%s to %s: %s (attempt %d)\n", n.Channel, n.Target, n.State, n.Attempts)
				if n.Error != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "reason: %s\n", n.Error)
				}
			}
			switch n.State {
			case "sent":
				return nil
			case "pending":
				return &ExitError{Code: ExitFailed, Msg: fmt.Sprintf("not sent within %s: %s", wait, n.Error)}
			}
			return &ExitError{Code: ExitFailed, Msg: "the test message was not sent: " + n.State}
		},
	}
	test.Flags().DurationVar(&wait, "wait", time.Minute, "how long to wait for the outcome")

	list := &cobra.Command{
		Use:   "list TASK_ID",
		Short: "List the notifications a task's routes produced and their delivery state",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := authCLIClient()
			if err != nil {
				return err
			}
			list, err := c.TaskNotifications(cmd.Context(), args[0])
			if err != nil {
				return authCLIError("listing the notifications of "+args[0], err)
			}
			if asJSON {
				return printAuthJSON(cmd.OutOrStdout(), list)
			}
			if len(list) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no notifications")
			}
			for _, n := range list {
				line := fmt.Sprintf("%-15s %-13s %-40s %s", n.Event, n.Channel, n.Target, n.State)
				if n.Error != "" {
					line += " — " + n.Error
				}
				fmt.Fprintln(cmd.OutOrStdout(), line)
			}
			return nil
		},
	}
	cmd.AddCommand(test, list)
	return cmd
}

// testMessage is the API method and body of a test message to target.
func testMessage(channel, target string, now time.Time) (string, map[string]any, error) {
	host, _ := os.Hostname()
	text := fmt.Sprintf("A test message from hopper (hopper notify test, on %s at %s).", host, now.UTC().Format(time.RFC3339))
	switch channel {
	case "email":
		return "email", map[string]any{"address": target, "subject": "hopper notification test",
			"content": text + "\n\nIf you can read this, email notifications work."}, nil
	case "slack", "slack-channel":
		return "slack", map[string]any{"channelId": target, "text": text}, nil
	case "matrix", "matrix-room":
		return "matrix", map[string]any{"roomId": target, "body": text}, nil
	case "pulse":
		return "pulse", map[string]any{"routingKey": target, "message": map[string]any{"test": true, "text": text}}, nil
	case "webhook":
		return "webhook", map[string]any{"name": target, "message": map[string]any{"test": true, "text": text}}, nil
	}
	return "", nil, usagef("unknown channel %q: one of email, slack, matrix, pulse, webhook", channel)
}

// waitForNotification polls until the notification is no longer pending or
// wait has passed, and returns its last state.
func waitForNotification(ctx context.Context, c *tcclient.Client, id string, wait time.Duration) (*tcclient.Notification, error) {
	if id == "" {
		return nil, fmt.Errorf("the server did not say which notification it stored")
	}
	deadline := time.Now().Add(wait)
	for {
		n, err := c.Notification(ctx, id)
		if err != nil {
			return nil, err
		}
		if n.State != "pending" || time.Now().After(deadline) {
			return n, nil
		}
		if err := tcclient.SleepContext(ctx, 250*time.Millisecond); err != nil {
			return nil, err
		}
	}
}
