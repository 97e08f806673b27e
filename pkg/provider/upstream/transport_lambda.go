//go:build lambda.norpc

package upstream

import "net/http"

// defaultTransport is net/http's Transport in the Lambda bootstrap (built
// with lambda.norpc). fastTransport (fast.go) saves CPU per call where one
// process serves many calls at once, the local server; a Lambda instance
// serves one request at a time, so there it would save little, while
// fasthttp would add about 590 KB to a bootstrap that must stay under
// 11.5 MiB and start within 35 ms (issue 11).
func defaultTransport() http.RoundTripper { return newTransport() }
