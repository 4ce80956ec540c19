package loginapi

import (
	"bytes"
	"html/template"
	"net/http"

	"github.com/hopper-ci/hopper/internal/api"
)

var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">
<title>{{.Title}} · hopper</title></head>
<body><main><h1>{{.Title}}</h1><p id="detail">{{.Detail}}</p>
<p><a href="/ui/">Back to the console</a></p></main></body></html>
`))

// page is the HTML page a browser sees when a sign-in is refused: what
// went wrong, in words, and nothing granted.
func page(status int, title, detail string) *api.Response {
	var b bytes.Buffer
	_ = pageTemplate.Execute(&b, struct{ Title, Detail string }{title, detail})
	h := http.Header{}
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	return &api.Response{Status: status, Header: h, RawBody: b.Bytes()}
}
