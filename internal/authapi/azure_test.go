package authapi_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hopper-ci/hopper/internal/authapi"
	"github.com/hopper-ci/hopper/internal/e2e"
	"github.com/hopper-ci/hopper/internal/tcclient"
)

func azureDo(t *testing.T, method, url, contentType, body string, header map[string]string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader([]byte(body)))
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("x-ms-version", "2019-12-12")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestAzureAgainstAzurite: the Azure methods list an emulated account's
// tables and containers, create what a read-write SAS is for, and their
// shared access signatures are accepted by Azure storage's emulator for
// exactly the table or container and level asked for.
func TestAzureAgainstAzurite(t *testing.T) {
	t.Parallel()
	blob, table := e2e.StartAzurite(t)
	const account = "devstoreaccount1"
	b := startIdentityAzure(t, &authapi.AzureStorage{Accounts: map[string]string{account: e2e.AzuriteKey}, BlobEndpoint: blob, TableEndpoint: table})
	ctx := context.Background()
	auth := b.Root
	var accounts struct{ Accounts []string }
	require.NoError(t, auth.DoAuth(ctx, http.MethodGet, "/azure/accounts", nil, nil, &accounts))
	require.Equal(t, []string{account}, accounts.Accounts)

	var sas struct {
		SAS    string
		Expiry tcclient.Time
	}
	tableURL := strings.ReplaceAll(table, "{account}", account)
	blobURL := strings.ReplaceAll(blob, "{account}", account)
	require.NoError(t, auth.DoAuth(ctx, http.MethodGet, "/azure/"+account+"/table/builds/read-write", nil, nil, &sas))
	require.True(t, sas.Expiry.Time.After(time.Now().Add(20*time.Minute)))
	entity := `{"PartitionKey":"p","RowKey":"r1"}`
	require.Equal(t, http.StatusNoContent, azureDo(t, http.MethodPost, tableURL+"/builds?"+sas.SAS, "application/json", entity,
		map[string]string{"Prefer": "return-no-content", "Accept": "application/json;odata=nometadata"}), "read-write writes")
	rw := sas.SAS

	require.NoError(t, auth.DoAuth(ctx, http.MethodGet, "/azure/"+account+"/table/builds/read-only", nil, nil, &sas))
	require.Equal(t, http.StatusOK, azureDo(t, http.MethodGet, tableURL+"/builds()?"+sas.SAS, "", "", map[string]string{"Accept": "application/json;odata=nometadata"}))
	require.Equal(t, http.StatusForbidden, azureDo(t, http.MethodPost, tableURL+"/builds?"+sas.SAS, "application/json", `{"PartitionKey":"p","RowKey":"r2"}`,
		map[string]string{"Accept": "application/json;odata=nometadata"}), "read-only cannot write")
	require.NoError(t, auth.DoAuth(ctx, http.MethodGet, "/azure/"+account+"/table/other/read-write", nil, nil, &sas))
	require.Equal(t, http.StatusForbidden, azureDo(t, http.MethodPost, tableURL+"/builds?"+sas.SAS, "application/json", `{"PartitionKey":"p","RowKey":"r3"}`,
		map[string]string{"Accept": "application/json;odata=nometadata"}), "another table's SAS")
	_ = rw

	var tables struct{ Tables []string }
	require.NoError(t, auth.DoAuth(ctx, http.MethodGet, "/azure/"+account+"/tables", nil, nil, &tables))
	require.ElementsMatch(t, []string{"builds", "other"}, tables.Tables)

	require.NoError(t, auth.DoAuth(ctx, http.MethodGet, "/azure/"+account+"/containers/artifacts/read-write", nil, nil, &sas))
	require.Equal(t, http.StatusCreated, azureDo(t, http.MethodPut, blobURL+"/artifacts/a.txt?"+sas.SAS, "text/plain", "hello",
		map[string]string{"x-ms-blob-type": "BlockBlob"}), "read-write writes a blob")
	require.NoError(t, auth.DoAuth(ctx, http.MethodGet, "/azure/"+account+"/containers/artifacts/read-only", nil, nil, &sas))
	require.Equal(t, http.StatusOK, azureDo(t, http.MethodGet, blobURL+"/artifacts/a.txt?"+sas.SAS, "", "", nil))
	require.Equal(t, http.StatusForbidden, azureDo(t, http.MethodPut, blobURL+"/artifacts/b.txt?"+sas.SAS, "text/plain", "x",
		map[string]string{"x-ms-blob-type": "BlockBlob"}), "read-only cannot write")
	var containers struct{ Containers []string }
	require.NoError(t, auth.DoAuth(ctx, http.MethodGet, "/azure/"+account+"/containers", nil, nil, &containers))
	require.Equal(t, []string{"artifacts"}, containers.Containers)

	_, run := b.runningTask(t, withScopes("auth:azure-table:read-only:"+account+"/builds"))
	err := run.DoAuth(ctx, http.MethodGet, "/azure/"+account+"/table/builds/read-write", nil, nil, &sas)
	b.requireRefused(t, err, 403, "InsufficientScopes", run.Credentials.ClientID)
	require.NoError(t, run.DoAuth(ctx, http.MethodGet, "/azure/"+account+"/table/builds/read-only", nil, nil, &sas))
	err = auth.DoAuth(ctx, http.MethodGet, "/azure/nosuchaccount/table/builds/read-only", nil, nil, &sas)
	b.requireRefused(t, err, 404, "ResourceNotFound", "static/taskcluster/root")
	require.NotContains(t, b.logs.String(), e2e.AzuriteKey[:20], "no account key in the log")
}
