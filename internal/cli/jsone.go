package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/hopper-ci/hopper/internal/jsone"
)

// NewJSONECommand is `hopper jsone`: JSON-e templates, the language of
// hooks' tasks, rendered locally.
func NewJSONECommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "jsone",
		Short: "Render JSON-e templates (the language of hook tasks) locally",
		Args:  cobra.NoArgs,
	}
	var templateFile, contextFile, now string
	render := &cobra.Command{
		Use:   "render -t TEMPLATE [-c CONTEXT]",
		Short: "Render a JSON-e template (YAML or JSON) with a context and print the JSON result",
		Long: "Render a JSON-e template with a context, as a hook renders its task, and print the result as JSON.\n" +
			"Both files may be YAML or JSON; \"-\" reads standard input. The context is a mapping of variables;\n" +
			"`now` defaults to the current time (or --now), as in a hook's render.",
		Example: "  hopper jsone render -t task.yaml -c context.json\n" +
			"  echo '{\"$eval\": \"range(1, 4)\"}' | hopper jsone render -t -",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			at := time.Now()
			if now != "" {
				t, err := time.Parse(time.RFC3339Nano, now)
				if err != nil {
					return usagef("--now %q is not an RFC 3339 date-time (e.g. 2017-01-19T16:27:20.974Z)", now)
				}
				at = t
			}
			template, err := readJSONEDocument(cmd.InOrStdin(), templateFile)
			if err != nil {
				return err
			}
			context := map[string]any{}
			if contextFile != "" {
				doc, err := readJSONEDocument(cmd.InOrStdin(), contextFile)
				if err != nil {
					return err
				}
				m, ok := doc.(map[string]any)
				if !ok {
					return usagef("%s: the context must be a mapping (object), not %s", contextFile, kindOf(doc))
				}
				context = m
			}
			result, err := jsone.RenderAt(template, context, at)
			if err != nil {
				return &ExitError{Code: ExitFailed, Msg: oneLine(fmt.Sprintf("rendering %s: %v", templateFile, err))}
			}
			var out bytes.Buffer
			enc := json.NewEncoder(&out)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(result); err != nil {
				return fmt.Errorf("encoding the result of %s: %w", templateFile, err)
			}
			_, err = cmd.OutOrStdout().Write(out.Bytes())
			return err
		},
	}
	render.Flags().StringVarP(&templateFile, "template", "t", "", "template file, YAML or JSON (\"-\" for standard input)")
	render.Flags().StringVarP(&contextFile, "context", "c", "", "context file, a YAML or JSON mapping (\"-\" for standard input)")
	render.Flags().StringVar(&now, "now", "", "render as if it were this RFC 3339 time (default: now)")
	_ = render.MarkFlagRequired("template")
	cmd.AddCommand(render)
	return cmd
}

// readJSONEDocument reads a YAML or JSON file ("-" is in) into JSON values.
func readJSONEDocument(in io.Reader, name string) (any, error) {
	var (
		data []byte
		err  error
	)
	if name == "-" {
		data, err = io.ReadAll(in)
	} else {
		data, err = os.ReadFile(name)
	}
	if err != nil {
		return nil, usagef("reading %s: %v", name, err)
	}
	trimmed := bytes.TrimSpace(bytes.TrimPrefix(data, []byte("\xef\xbb\xbf")))
	if len(trimmed) == 0 {
		return nil, usagef("%s is empty: expected YAML or JSON", name)
	}
	// JSON is read as JSON when it looks like it (better messages, exact
	// numbers); anything else as YAML.
	if trimmed[0] == '{' || trimmed[0] == '[' {
		doc, err := parseJSON(trimmed)
		if err == nil {
			return doc, nil
		}
		if _, yerr := parseYAML(trimmed); yerr != nil {
			return nil, usagef("%s: invalid JSON: %v", name, err)
		}
	}
	doc, err := parseYAML(trimmed)
	if err != nil {
		return nil, usagef("%s: invalid YAML: %v", name, err)
	}
	return doc, nil
}
