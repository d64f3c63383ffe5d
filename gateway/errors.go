package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Error is an API error: an HTTP status and OpenAI's error object
// {"error":{"message","type","param","code"}}. Backends return it for
// failures they can classify; any other error is a 502.
type Error struct {
	Status  int
	Type    string
	Code    string
	Param   string
	Message string
	// NoRetry sends x-should-retry: false (set for every error once money
	// moved, and for errors a retry cannot cure).
	NoRetry bool
	// RetryAfter, if set, is sent as Retry-After (429).
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Message }

// Error types (OpenAI's vocabulary where it has a word).
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeAuthentication = "authentication_error"
	TypePermission     = "permission_error"
	TypeBilling        = "billing_error"
	TypeRateLimit      = "rate_limit_error"
	TypeAPI            = "api_error"
)

// Error codes the gateway sends; clients branch on them.
const (
	CodeUnsupportedParameter = "unsupported_parameter"
	CodeInvalidValue         = "invalid_value"
	CodeInvalidJSON          = "invalid_json"
	CodeContextLength        = "context_length_exceeded"
	CodeInvalidAPIKey        = "invalid_api_key"
	CodeHostNotAllowed       = "host_not_allowed"
	CodeUnsupportedMedia     = "unsupported_media_type"
	CodeRequestTooLarge      = "request_too_large"
	CodeMethodNotAllowed     = "method_not_allowed"
	CodeUnknownURL           = "unknown_url"
	CodeModelNotFound        = "model_not_found"
	CodeInsufficientFunds    = "insufficient_funds"
	CodeBudgetExceeded       = "budget_exceeded"
	CodeConcurrencyLimit     = "concurrency_limit"
	CodeNoProviders          = "no_providers"
	CodeUnverified           = "no_verified_result"
	CodeResultOverruled      = "result_overruled"
	CodeChain                = "chain_error"
	CodeTimeout              = "timeout"
	CodeShuttingDown         = "shutting_down"
	CodeSessionFailed        = "session_failed"
	CodeRequestTimeout       = "request_timeout"
	CodeIdempotencyReused    = "idempotency_key_reused"
)

func invalid(param, code, format string, a ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Code: code, Param: param, Message: fmt.Sprintf(format, a...)}
}

func unsupported(param, why string) *Error {
	return invalid(param, CodeUnsupportedParameter, "%s is not supported: %s", param, why)
}

// errorBody is the JSON envelope.
type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

func (e *Error) body() errorBody {
	o := errorObject{Message: e.Message, Type: e.Type, Code: e.Code}
	if e.Param != "" {
		o.Param = &e.Param
	}
	return errorBody{Error: o}
}

func (e *Error) header(h http.Header) {
	h.Set("Content-Type", "application/json")
	if e.NoRetry {
		h.Set("X-Should-Retry", "false")
	}
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
}

// writeError answers w with e.
func writeError(w http.ResponseWriter, e *Error) {
	e.header(w.Header())
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(e.body())
}
