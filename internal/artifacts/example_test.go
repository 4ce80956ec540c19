package artifacts_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/hopper-ci/hopper/internal/artifacts"
)

// Example shows the life of an "s3" artifact on the local backend: the
// queue mints a putUrl, the worker PUTs the bytes without Taskcluster
// credentials, and a downloader follows a signed GET URL.
func Example() {
	dir, err := os.MkdirTemp("", "blobs")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	// The API server's mux; the backend needs the server's root URL.
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	defer srv.Close()

	ctx := context.Background()
	backend, err := artifacts.Open(ctx, "local", artifacts.Options{Local: artifacts.LocalOptions{
		Dir:        dir,
		BaseURL:    srv.URL,
		SigningKey: bytes.Repeat([]byte{0x42}, artifacts.MinSigningKeyLen), // from configuration in real use
	}})
	if err != nil {
		panic(err)
	}
	if m, ok := backend.(artifacts.Mountable); ok {
		mux.Handle(m.MountPath(), m)
	}

	key := "fN1Dm2HbT3mBIDvBWmWkVw/0/public/logs/live.log"
	putURL, err := backend.PutURL(ctx, key, "text/plain; charset=utf-8", time.Now().Add(45*time.Minute))
	if err != nil {
		panic(err)
	}
	req, _ := http.NewRequest(http.MethodPut, putURL, strings.NewReader("hello from the worker\n"))
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println("upload:", resp.Status)

	info, err := backend.Stat(ctx, key)
	if err != nil {
		panic(err)
	}
	fmt.Println("stored:", info.Size, "bytes of", info.ContentType)

	getURL, err := backend.GetURL(ctx, key, time.Now().Add(30*time.Minute))
	if err != nil {
		panic(err)
	}
	resp, err = http.Get(getURL)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("download: %s %q\n", resp.Status, body)
	// Output:
	// upload: 200 OK
	// stored: 22 bytes of text/plain; charset=utf-8
	// download: 200 OK "hello from the worker\n"
}
