package authapi

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/api"
	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/queue"
	"github.com/hopper-ci/hopper/internal/store"
)

// Scope expressions of the Azure methods (Taskcluster's).
const (
	scopesAzureAccounts   = `"auth:azure-table:list-accounts"`
	scopesAzureTables     = `"auth:azure-table:list-tables:<account>"`
	scopesAzureContainers = `"auth:azure-container:list-containers:<account>"`
	scopesAzureTableSAS   = `{"if":"levelIsReadOnly","then":{"AnyOf":["auth:azure-table:read-only:<account>/<table>","auth:azure-table:read-write:<account>/<table>"]},` +
		`"else":"auth:azure-table:read-write:<account>/<table>"}`
	scopesAzureContainerSAS = `{"if":"levelIsReadOnly","then":{"AnyOf":["auth:azure-container:read-only:<account>/<container>","auth:azure-container:read-write:<account>/<container>"]},` +
		`"else":"auth:azure-container:read-write:<account>/<container>"}`
)

// azureVersion is the storage REST version hopper speaks.
const azureVersion = auth.AzureSASVersion

// AzureStorage are the Azure storage accounts whose tables and blob
// containers the Azure methods hand out shared access signatures for
// (Taskcluster's azureAccounts configuration).
type AzureStorage struct {
	// Accounts maps an account's name to its access key (base64).
	Accounts map[string]string
	// BlobEndpoint and TableEndpoint are the services' URLs, with
	// {account} where the account's name goes (defaults:
	// https://{account}.blob.core.windows.net and
	// https://{account}.table.core.windows.net; Azurite serves
	// http://127.0.0.1:10000/{account} and :10002).
	BlobEndpoint, TableEndpoint string
	// HTTPClient makes the storage calls (default: 30 s timeout).
	HTTPClient *http.Client
}

// String never shows a key.
func (a *AzureStorage) String() string {
	names := make([]string, 0, len(a.Accounts))
	for n := range a.Accounts {
		names = append(names, n)
	}
	slices.Sort(names)
	return fmt.Sprintf("AzureStorage{Accounts:%v}", names)
}

func (a *AzureStorage) endpoint(template, def, account string) string {
	if template == "" {
		template = def
	}
	return strings.TrimRight(strings.ReplaceAll(template, "{account}", account), "/")
}

func (a *AzureStorage) client() *http.Client {
	if a.HTTPClient != nil {
		return a.HTTPClient
	}
	return &http.Client{Timeout: 30 * time.Second}
}

// azureRoutes are Taskcluster's five Azure methods.
func (h *handlers) azureRoutes() []api.Route {
	p := func(path string) []string { return []string{BasePath + path} }
	return []api.Route{
		{Name: "azureAccounts", Method: http.MethodGet, Paths: p("/azure/accounts"), Scopes: scopesAzureAccounts, EarlyScopes: true, Handle: h.azureAccounts},
		{Name: "azureTables", Method: http.MethodGet, Paths: p("/azure/{account}/tables"), Query: []string{"continuationToken"},
			Scopes: scopesAzureTables, EarlyScopes: true, Handle: h.azureTables},
		{Name: "azureTableSAS", Method: http.MethodGet, Paths: p("/azure/{account}/table/{table}/{level}"), Scopes: scopesAzureTableSAS, Handle: h.azureTableSAS},
		{Name: "azureContainers", Method: http.MethodGet, Paths: p("/azure/{account}/containers"), Query: []string{"continuationToken"},
			Scopes: scopesAzureContainers, EarlyScopes: true, Handle: h.azureContainers},
		{Name: "azureContainerSAS", Method: http.MethodGet, Paths: p("/azure/{account}/containers/{container}/{level}"), Scopes: scopesAzureContainerSAS,
			Handle: h.azureContainerSAS},
	}
}

// account returns an account's key, or Taskcluster's ResourceNotFound.
func (h *handlers) azureAccount(name string) (string, error) {
	if h.Azure != nil {
		if key, ok := h.Azure.Accounts[name]; ok {
			return key, nil
		}
	}
	return "", notFound("Account '%s' not found, can't delegate access", name)
}

func (h *handlers) azureAccounts(c *api.Call) (any, error) {
	names := []string{}
	if h.Azure != nil {
		for n := range h.Azure.Accounts {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return map[string]any{"accounts": names}, nil
}

// Names Azure accepts (its naming rules), checked before they reach a URL.
var (
	azureTablePattern     = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]{2,62}$`)
	azureContainerPattern = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9]|-[a-z0-9]){2,62}$`)
)

// azureSAS checks and authorizes a SAS request, auditing refusals, and
// returns the account's key.
func (h *handlers) azureSAS(c *api.Call, kind, nameParam string, pattern *regexp.Regexp) (key string, err error) {
	account, name, level := c.Params["account"], c.Params[nameParam], c.Params["level"]
	entity := "azure-" + kind + ":" + level + ":" + account + "/" + name
	defer func() {
		if err != nil {
			h.auditRefusal(c, store.AuditCloudCredentials, entity, "azure "+kind+" SAS refused: "+errorCode(err))
		}
	}()
	if level != auth.AzureReadOnly && level != auth.AzureReadWrite {
		return "", inputError("the 'level' URL parameter must be read-only or read-write; got %s", level)
	}
	if !pattern.MatchString(name) {
		return "", api.InvalidParam(nameParam, name, pattern)
	}
	if err := c.Authorize(c.Route.Scopes, map[string]any{"account": account, nameParam: name, "level": level,
		"levelIsReadOnly": level == auth.AzureReadOnly}); err != nil {
		return "", err
	}
	return h.azureAccount(account)
}

type sasReply struct {
	SAS    string     `json:"sas"`
	Expiry queue.Time `json:"expiry"`
}

// azureTableSAS answers a SAS for a table, creating the table first for
// read-write (as Taskcluster does).
func (h *handlers) azureTableSAS(c *api.Call) (any, error) {
	key, err := h.azureSAS(c, "table", "table", azureTablePattern)
	if err != nil {
		return nil, err
	}
	account, table, level := c.Params["account"], c.Params["table"], c.Params["level"]
	if level == auth.AzureReadWrite {
		body, _ := json.Marshal(map[string]string{"TableName": table})
		status, _, reply, err := h.azureTableCall(c.Context(), account, key, http.MethodPost, "/Tables", nil, body)
		if err != nil {
			return nil, err
		}
		if status != http.StatusCreated && status != http.StatusNoContent && status != http.StatusConflict {
			return nil, fmt.Errorf("creating Azure table %s/%s: %d %s", account, table, status, reply)
		}
	}
	expiry := c.Now.Add(auth.AzureSASLifetime)
	sas, err := auth.AzureTableSAS(account, key, table, level, c.Now, expiry)
	if err != nil {
		return nil, err
	}
	return sasReply{SAS: sas, Expiry: queue.NewTime(expiry)}, nil
}

// azureContainerSAS answers a SAS for a blob container, creating the
// container first for read-write (as Taskcluster does).
func (h *handlers) azureContainerSAS(c *api.Call) (any, error) {
	key, err := h.azureSAS(c, "container", "container", azureContainerPattern)
	if err != nil {
		return nil, err
	}
	account, container, level := c.Params["account"], c.Params["container"], c.Params["level"]
	if level == auth.AzureReadWrite {
		status, _, reply, err := h.azureBlobCall(c.Context(), account, key, http.MethodPut, "/"+container, url.Values{"restype": {"container"}})
		if err != nil {
			return nil, err
		}
		if status != http.StatusCreated && status != http.StatusConflict {
			return nil, fmt.Errorf("creating Azure container %s/%s: %d %s", account, container, status, reply)
		}
	}
	expiry := c.Now.Add(auth.AzureSASLifetime)
	sas, err := auth.AzureContainerSAS(account, key, container, level, c.Now, expiry)
	if err != nil {
		return nil, err
	}
	return sasReply{SAS: sas, Expiry: queue.NewTime(expiry)}, nil
}

// azureTables lists an account's tables, a page at a time.
func (h *handlers) azureTables(c *api.Call) (any, error) {
	account := c.Params["account"]
	key, err := h.azureAccount(account)
	if err != nil {
		return nil, err
	}
	q := url.Values{}
	if t := c.R.URL.Query().Get("continuationToken"); t != "" {
		q.Set("NextTableName", t)
	}
	status, header, body, err := h.azureTableCall(c.Context(), account, key, http.MethodGet, "/Tables", q, nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("listing the tables of Azure account %s: %d %s", account, status, body)
	}
	var page struct {
		Value []struct {
			TableName string `json:"TableName"`
		} `json:"value"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, fmt.Errorf("reading the tables of Azure account %s: %w", account, err)
	}
	out := map[string]any{"tables": []string{}}
	names := []string{}
	for _, t := range page.Value {
		names = append(names, t.TableName)
	}
	out["tables"] = names
	if next := header.Get("x-ms-continuation-NextTableName"); next != "" {
		out["continuationToken"] = next
	}
	return out, nil
}

// azureContainers lists an account's blob containers, a page at a time.
func (h *handlers) azureContainers(c *api.Call) (any, error) {
	account := c.Params["account"]
	key, err := h.azureAccount(account)
	if err != nil {
		return nil, err
	}
	q := url.Values{"comp": {"list"}}
	if t := c.R.URL.Query().Get("continuationToken"); t != "" {
		q.Set("marker", t)
	}
	status, _, body, err := h.azureBlobCall(c.Context(), account, key, http.MethodGet, "/", q)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("listing the containers of Azure account %s: %d %s", account, status, body)
	}
	var page struct {
		Names      []string `xml:"Containers>Container>Name"`
		NextMarker string   `xml:"NextMarker"`
	}
	if err := xml.Unmarshal(body, &page); err != nil {
		return nil, fmt.Errorf("reading the containers of Azure account %s: %w", account, err)
	}
	out := map[string]any{"containers": append([]string{}, page.Names...)}
	if page.NextMarker != "" {
		out["continuationToken"] = page.NextMarker
	}
	return out, nil
}

// azureTableCall makes one Table service request signed with Shared Key
// Lite.
func (h *handlers) azureTableCall(ctx context.Context, account, key, method, path string, q url.Values, body []byte) (int, http.Header, []byte, error) {
	base := h.Azure.endpoint(h.Azure.TableEndpoint, "https://{account}.table.core.windows.net", account)
	u, err := url.Parse(base + path)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("Azure table endpoint: %w", err)
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	date := time.Now().UTC().Format(http.TimeFormat)
	authz, err := auth.AzureSharedKeyLite(account, key, date, u.EscapedPath())
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("x-ms-date", date)
	req.Header.Set("x-ms-version", azureVersion)
	req.Header.Set("Accept", "application/json;odata=nometadata")
	req.Header.Set("DataServiceVersion", "3.0;NetFx")
	req.Header.Set("Authorization", authz)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Prefer", "return-no-content")
	}
	return h.azureDo(req)
}

// azureBlobCall makes one Blob service request signed with Shared Key.
func (h *handlers) azureBlobCall(ctx context.Context, account, key, method, path string, q url.Values) (int, http.Header, []byte, error) {
	base := h.Azure.endpoint(h.Azure.BlobEndpoint, "https://{account}.blob.core.windows.net", account)
	u, err := url.Parse(base + path)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("Azure blob endpoint: %w", err)
	}
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, method, u.String(), http.NoBody)
	if err != nil {
		return 0, nil, nil, err
	}
	date := time.Now().UTC().Format(http.TimeFormat)
	length := ""
	if method == http.MethodPut {
		length = "0"
		req.ContentLength = 0
	}
	authz, err := auth.AzureSharedKey(account, key, method, length, "", "x-ms-date:"+date+"\nx-ms-version:"+azureVersion+"\n", u.EscapedPath(), q)
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("x-ms-date", date)
	req.Header.Set("x-ms-version", azureVersion)
	req.Header.Set("Authorization", authz)
	if method == http.MethodPut {
		req.Header.Set("Content-Length", strconv.Itoa(0))
	}
	return h.azureDo(req)
}

func (h *handlers) azureDo(req *http.Request) (int, http.Header, []byte, error) {
	resp, err := h.Azure.client().Do(req)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("calling Azure storage (%s %s): %w", req.Method, req.URL.Host, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("reading Azure storage's answer: %w", err)
	}
	return resp.StatusCode, resp.Header, body, nil
}

// errorCode is an API error's code, or the error's text.
func errorCode(err error) string {
	if apiErr := api.AsError(err); apiErr != nil {
		return apiErr.Code
	}
	return err.Error()
}
