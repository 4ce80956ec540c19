package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/hopper-ci/hopper/internal/schema"
	"github.com/hopper-ci/hopper/internal/store"
)

// Error codes of Taskcluster's error format (docs/contract/queue.md §1.5).
const (
	CodeMalformedPayload        = "MalformedPayload"
	CodeInvalidRequestArguments = "InvalidRequestArguments"
	CodeInputValidationError    = "InputValidationError"
	CodeInputError              = "InputError"
	CodeAuthenticationFailed    = "AuthenticationFailed"
	CodeInsufficientScopes      = "InsufficientScopes"
	CodeResourceNotFound        = "ResourceNotFound"
	CodeRequestConflict         = "RequestConflict"
	CodeResourceExpired         = "ResourceExpired"
	CodeInputTooLarge           = "InputTooLarge"
	CodeInternalServerError     = "InternalServerError"
	// CodeServiceUnavailable is hopper's answer when it cannot serve for a
	// while (its database is unreachable, request bodies fill its
	// budget): 503 with Retry-After, which clients and load balancers
	// retry, where Taskcluster answers 500.
	CodeServiceUnavailable = "ServiceUnavailable"
	// CodeDenylistedAddress is the Notify service's answer for an address
	// on its denylist.
	CodeDenylistedAddress = "DenylistedAddress"
	// CodeNoMatchingMethod is the object service's answer when no
	// download method the caller accepts is available.
	CodeNoMatchingMethod = "NoMatchingMethod"
)

var codeStatus = map[string]int{
	CodeMalformedPayload:        http.StatusBadRequest,
	CodeInvalidRequestArguments: http.StatusBadRequest,
	CodeInputValidationError:    http.StatusBadRequest,
	CodeInputError:              http.StatusBadRequest,
	CodeAuthenticationFailed:    http.StatusUnauthorized,
	CodeInsufficientScopes:      http.StatusForbidden,
	CodeResourceNotFound:        http.StatusNotFound,
	CodeRequestConflict:         http.StatusConflict,
	CodeResourceExpired:         http.StatusGone,
	CodeInputTooLarge:           http.StatusRequestEntityTooLarge,
	CodeInternalServerError:     http.StatusInternalServerError,
	CodeServiceUnavailable:      http.StatusServiceUnavailable,
	CodeDenylistedAddress:       http.StatusBadRequest,
	CodeNoMatchingMethod:        http.StatusNotAcceptable,
}

// unavailableRetryAfter is the Retry-After, in seconds, of a call that
// failed because the database could not be reached.
const unavailableRetryAfter = 5

// Error is an API error answered in Taskcluster's error format.
type Error struct {
	Code    string
	Message string
	Details map[string]any
	// RetryAfter, in seconds, is sent as the Retry-After header (0: none).
	RetryAfter int
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Status is the HTTP status of the error code.
func (e *Error) Status() int {
	if s, ok := codeStatus[e.Code]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Errorf is an API error of code with a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// NotFoundf is a ResourceNotFound error.
func NotFoundf(format string, args ...any) *Error {
	return Errorf(CodeResourceNotFound, format, args...)
}

// CodedError is an error of a service's rules that names the Taskcluster
// error code it is answered with and the details the answer carries
// (queue.Error): the rules need not import the framework, nor the
// framework the rules.
type CodedError interface {
	error
	ErrorCode() string
	ErrorDetails() map[string]any
}

// timeLayout is Taskcluster's timestamp layout (queue.TimeLayout), in
// which an error body says when it happened.
const timeLayout = "2006-01-02T15:04:05.000Z"

// AsError maps domain and store errors onto API errors in one place; nil
// when err is none of them (an internal error).
func AsError(err error) *Error {
	var apiErr *Error
	if errors.As(err, &apiErr) {
		return apiErr
	}
	var coded CodedError
	if errors.As(err, &coded) {
		return &Error{Code: coded.ErrorCode(), Message: coded.Error(), Details: coded.ErrorDetails()}
	}
	var ve *schema.ValidationError
	if errors.As(err, &ve) {
		msg := ve.Error()
		if tc := ve.TaskclusterText(); tc != "" {
			msg += "\n\n" + tc
		}
		return &Error{Code: CodeInputValidationError, Message: msg}
	}
	if database, ok := store.Unavailable(err); ok {
		return &Error{Code: CodeServiceUnavailable, RetryAfter: unavailableRetryAfter, Message: fmt.Sprintf(
			"hopper cannot reach its database (%s) and did not carry out the request, or cannot tell whether it did; retry in a few seconds",
			database)}
	}
	if errors.Is(err, store.ErrNotFound) {
		return NotFoundf("Resource not found")
	}
	if errors.Is(err, store.ErrBadContinuationToken) {
		return Errorf(CodeInputError, "Invalid continuationToken")
	}
	if errors.Is(err, store.ErrTextNUL) {
		// A NUL in a value stored as text (store.ErrTextNUL): the caller's
		// input, refused the same on every store.
		return &Error{Code: CodeInputValidationError, Message: "The request holds a NUL character (\\u0000) in a value hopper stores as text; NULs are kept only inside task definitions, hook definitions, index data and secrets"}
	}
	return nil
}

type errorBody struct {
	Code        string      `json:"code"`
	Message     string      `json:"message"`
	RequestInfo requestInfo `json:"requestInfo"`
	Details     any         `json:"details,omitempty"`
}

type requestInfo struct {
	Method  string            `json:"method"`
	Params  map[string]string `json:"params"`
	Payload json.RawMessage   `json:"payload"`
	Time    string            `json:"time"`
}

// errorResponse renders the body: the message gets Taskcluster's footer.
func errorResponse(e *Error, method string, params map[string]string, payload json.RawMessage, now time.Time) errorBody {
	ts := now.UTC().Format(timeLayout)
	if params == nil {
		params = map[string]string{}
	}
	if len(payload) == 0 || !json.Valid(payload) {
		payload = json.RawMessage("{}")
	}
	msg := fmt.Sprintf("%s\n\n---\n\n* method:     %s\n* errorCode:  %s\n* statusCode: %d\n* time:       %s",
		e.Message, method, e.Code, e.Status(), ts)
	body := errorBody{Code: e.Code, Message: msg, RequestInfo: requestInfo{Method: method, Params: params, Payload: payload, Time: ts}}
	if len(e.Details) > 0 {
		body.Details = e.Details
	}
	return body
}

// InvalidParam is the 400 for a URL parameter that does not match its
// pattern, worded as Taskcluster words it ("URL parameter 'hookId' given as
// 'x!' must match regular expression: '/^…$/'"): callers and Taskcluster's own
// tests match on that sentence, so every service uses this one.
func InvalidParam(name, value string, pattern fmt.Stringer) *Error {
	return Errorf(CodeInvalidRequestArguments,
		"Invalid URL patterns:\nURL parameter '%s' given as '%s' must match regular expression: '/%s/'", name, value, pattern)
}

// InvalidQuery is the 400 for a query-string value that does not match its
// pattern, in Taskcluster's words.
func InvalidQuery(name, value string, pattern fmt.Stringer) *Error {
	return Errorf(CodeInvalidRequestArguments,
		"Query-string parameter: %s=\"%s\" does not match expression: /%s/", name, value, pattern)
}

// Refusal is an API error as a caller of a method would have received it:
// Taskcluster's code, status, message (with its footer) and requestInfo.
// A service that calls another in-process (hooks creating tasks) gets its
// refusals so.
type Refusal struct {
	Code        string
	Status      int
	Message     string
	RequestInfo map[string]any
}

func (r *Refusal) Error() string { return r.Code + ": " + r.Message }

// NewRefusal renders an API error as its body would read.
func NewRefusal(e *Error, method string, params map[string]string, payload []byte, now time.Time) *Refusal {
	body := errorResponse(e, method, params, json.RawMessage(payload), now)
	info := map[string]any{}
	raw, _ := json.Marshal(body.RequestInfo)
	_ = json.Unmarshal(raw, &info)
	return &Refusal{Code: e.Code, Status: e.Status(), Message: body.Message, RequestInfo: info}
}
