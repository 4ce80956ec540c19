package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"
)

// AzureSASVersion is the storage service version hopper's shared access
// signatures are made for (the string-to-sign below is that version's).
const AzureSASVersion = "2019-12-12"

// Azure access levels (Taskcluster's azureTableSAS and azureContainerSAS).
const (
	AzureReadOnly  = "read-only"
	AzureReadWrite = "read-write"
)

// AzureSASLifetime is how long a shared access signature lasts: 25
// minutes, as Taskcluster's.
const AzureSASLifetime = 25 * time.Minute

// azureTime is a SAS time: UTC, whole seconds.
func azureTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// sign is the HMAC-SHA256 of s with the account key (base64, as Azure
// hands it out).
func azureSign(key, s string) (string, error) {
	k, err := base64.StdEncoding.DecodeString(key)
	if err != nil {
		return "", fmt.Errorf("the storage account key is not base64: %w", err)
	}
	m := hmac.New(sha256.New, k)
	m.Write([]byte(s))
	return base64.StdEncoding.EncodeToString(m.Sum(nil)), nil
}

// AzureTableSAS is a service SAS for one table of an account at a level
// (read-only: query; read-write: query, add, update, delete), valid from
// now until expiry; it returns the query string (without `?`).
func AzureTableSAS(account, key, table, level string, now, expiry time.Time) (string, error) {
	perms := "r"
	switch level {
	case AzureReadOnly:
	case AzureReadWrite:
		perms = "raud"
	default:
		return "", fmt.Errorf("level %q is neither %s nor %s", level, AzureReadOnly, AzureReadWrite)
	}
	start := azureTime(now.Add(-15 * time.Minute)) // clock skew, as Taskcluster allows
	se := azureTime(expiry)
	toSign := strings.Join([]string{perms, start, se, "/table/" + account + "/" + strings.ToLower(table),
		"", "", "https,http", AzureSASVersion, "", "", "", ""}, "\n")
	sig, err := azureSign(key, toSign)
	if err != nil {
		return "", err
	}
	q := url.Values{"sv": {AzureSASVersion}, "tn": {table}, "sp": {perms}, "st": {start}, "se": {se}, "spr": {"https,http"}, "sig": {sig}}
	return q.Encode(), nil
}

// AzureContainerSAS is a service SAS for one blob container of an account
// at a level (read-only: read, list; read-write: also add, create, write,
// delete), valid from now until expiry; it returns the query string.
func AzureContainerSAS(account, key, container, level string, now, expiry time.Time) (string, error) {
	perms := "rl"
	switch level {
	case AzureReadOnly:
	case AzureReadWrite:
		perms = "racwdl"
	default:
		return "", fmt.Errorf("level %q is neither %s nor %s", level, AzureReadOnly, AzureReadWrite)
	}
	start := azureTime(now.Add(-15 * time.Minute))
	se := azureTime(expiry)
	toSign := strings.Join([]string{perms, start, se, "/blob/" + account + "/" + container,
		"", "", "https,http", AzureSASVersion, "c", "", "", "", "", "", ""}, "\n")
	sig, err := azureSign(key, toSign)
	if err != nil {
		return "", err
	}
	q := url.Values{"sv": {AzureSASVersion}, "sr": {"c"}, "sp": {perms}, "st": {start}, "se": {se}, "spr": {"https,http"}, "sig": {sig}}
	return q.Encode(), nil
}

// AzureSharedKey is the Authorization header of a Blob service request
// signed with the account key (Shared Key), for the verb, the request's
// canonicalized x-ms- headers (already lower-case, sorted, "name:value\n"
// each), its path (as sent, starting with /) and its query values.
func AzureSharedKey(account, key, verb, contentLength, contentType, msHeaders, path string, query url.Values) (string, error) {
	var res strings.Builder
	res.WriteString("/" + account + path)
	keys := make([]string, 0, len(query))
	for k := range query {
		keys = append(keys, strings.ToLower(k))
	}
	slices.Sort(keys)
	for _, k := range keys {
		res.WriteString("\n" + k + ":" + strings.Join(query[k], ","))
	}
	if contentLength == "0" {
		contentLength = ""
	}
	toSign := strings.Join([]string{verb, "", "", contentLength, "", contentType, "", "", "", "", "", ""}, "\n") + "\n" + msHeaders + res.String()
	sig, err := azureSign(key, toSign)
	if err != nil {
		return "", err
	}
	return "SharedKey " + account + ":" + sig, nil
}

// AzureSharedKeyLite is the Authorization header of a Table service
// request signed with the account key (Shared Key Lite): the request's
// x-ms-date and its path (starting with /).
func AzureSharedKeyLite(account, key, date, path string) (string, error) {
	sig, err := azureSign(key, date+"\n/"+account+path)
	if err != nil {
		return "", err
	}
	return "SharedKeyLite " + account + ":" + sig, nil
}
