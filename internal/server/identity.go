package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/auth"
	"github.com/hopper-ci/hopper/internal/authapi"
	"github.com/hopper-ci/hopper/internal/maintenance"
)

// identityService makes hopper an OpenID issuer for tasks (createIdToken,
// the discovery document and key set at the root URL) and serves
// awsS3Credentials over the deployment's STS (docs/identity.md). Its keys
// are rotated by a duty, so a new key is published ahead of use even when
// nobody asks for tokens, and deleted once no token they signed is valid.
func (w *wiring) identityService() (service, error) {
	sts := w.cfg.S3STS
	if sts == nil {
		var err error
		if sts, err = LoadS3STS(os.Getenv); err != nil {
			return service{}, err
		}
	}
	if sts != nil {
		w.log.Info("awsS3Credentials on", "sts", sts.Endpoint, "buckets", sts.Buckets)
	}
	azure := w.cfg.Azure
	if azure == nil {
		var err error
		if azure, err = LoadAzure(os.Getenv); err != nil {
			return service{}, err
		}
	}
	if azure != nil {
		w.log.Info("Azure methods on", "azure", azure.String())
	}
	keys := authapi.NewKeyring(w.store, w.sec.Sealer, w.cfg.Clock)
	sec := w.sec
	routes := authapi.IdentityRoutes(authapi.Deps{Store: w.store, Caller: sec.Authorizer.Caller, Logger: w.log, S3: sts, Azure: azure,
		Identity: authapi.Identity{RootURL: w.cfg.RootURL, Keys: keys, Tasks: w.store, Forge: w.store, RunIssuer: QueueClientID}})
	return service{
		routes: routes,
		duties: []maintenance.Service{&maintenance.Every{What: "rotating the identity-token signing keys", Interval: authapi.DefaultKeyRotateEvery,
			Logger: w.log, Pass: keys.Rotate}},
		expiries: []maintenance.Expiry{
			{Service: "identity", Run: func(ctx context.Context, now time.Time) (int, error) {
				return w.store.ExpireSigningKeys(ctx, now.Add(-auth.MaxIDTokenLifetime))
			}},
			{Service: "identity", Run: w.store.ExpireTaskIdentities},
		},
	}, nil
}

// LoadAzure reads the Azure methods' storage accounts from the
// environment: HOPPER_AZURE_ACCOUNTS_FILE names a JSON file mapping each
// account's name to its access key (Taskcluster's azureAccounts; a file,
// never a flag), and HOPPER_AZURE_BLOB_ENDPOINT and
// HOPPER_AZURE_TABLE_ENDPOINT, with {account} where the name goes, point
// elsewhere than Azure's public cloud (Azurite, a sovereign cloud).
// Without the file it returns nil: the Azure methods know no account.
func LoadAzure(getenv func(string) string) (*authapi.AzureStorage, error) {
	path := getenv("HOPPER_AZURE_ACCOUNTS_FILE")
	if path == "" {
		return nil, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("Azure methods: reading HOPPER_AZURE_ACCOUNTS_FILE: %w", err)
	}
	a := &authapi.AzureStorage{BlobEndpoint: getenv("HOPPER_AZURE_BLOB_ENDPOINT"), TableEndpoint: getenv("HOPPER_AZURE_TABLE_ENDPOINT")}
	if err := json.Unmarshal(b, &a.Accounts); err != nil {
		// The error would quote the file, keys and all: say where only.
		return nil, fmt.Errorf("Azure methods: %s is not a JSON object of account names and keys", path)
	}
	return a, nil
}

// LoadS3STS reads awsS3Credentials' STS from the environment: its
// endpoint, buckets, region and role in HOPPER_AWS_S3_STS_ENDPOINT,
// HOPPER_AWS_S3_BUCKETS (comma-separated), HOPPER_AWS_S3_REGION and
// HOPPER_AWS_S3_ROLE_ARN; its credentials in HOPPER_AWS_S3_ACCESS_KEY_ID
// and HOPPER_AWS_S3_SECRET_ACCESS_KEY, or the files the same names with
// _FILE name (never flags, which other users of the machine can read).
// Without an endpoint it returns nil: awsS3Credentials then has no bucket.
func LoadS3STS(getenv func(string) string) (*authapi.S3STS, error) {
	endpoint := getenv("HOPPER_AWS_S3_STS_ENDPOINT")
	if endpoint == "" {
		return nil, nil
	}
	secret := func(name string) (string, error) {
		if v := getenv(name); v != "" {
			return v, nil
		}
		path := getenv(name + "_FILE")
		if path == "" {
			return "", fmt.Errorf("awsS3Credentials: HOPPER_AWS_S3_STS_ENDPOINT is set but neither %s nor %s_FILE is", name, name)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return "", fmt.Errorf("awsS3Credentials: reading %s_FILE: %w", name, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	s := &authapi.S3STS{Endpoint: endpoint, Region: getenv("HOPPER_AWS_S3_REGION"), RoleARN: getenv("HOPPER_AWS_S3_ROLE_ARN")}
	var err error
	if s.AccessKeyID, err = secret("HOPPER_AWS_S3_ACCESS_KEY_ID"); err != nil {
		return nil, err
	}
	if s.SecretAccessKey, err = secret("HOPPER_AWS_S3_SECRET_ACCESS_KEY"); err != nil {
		return nil, err
	}
	for _, b := range strings.Split(getenv("HOPPER_AWS_S3_BUCKETS"), ",") {
		if b = strings.TrimSpace(b); b != "" {
			s.Buckets = append(s.Buckets, b)
		}
	}
	if len(s.Buckets) == 0 {
		return nil, errors.New("awsS3Credentials: HOPPER_AWS_S3_STS_ENDPOINT is set but HOPPER_AWS_S3_BUCKETS names no bucket")
	}
	return s, nil
}
