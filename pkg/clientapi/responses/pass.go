package responses

import (
	"net/http"

	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/gateway"
	"github.com/buzzgate/buzzgate/pkg/llm"
	"github.com/buzzgate/buzzgate/pkg/router"
	responseswire "github.com/buzzgate/buzzgate/pkg/wire/responses"
)

// passStream relays a Responses stream passed through: the provider's
// events as it sent them, the terminal event with the cost in its
// response's usage.
func (c *responsesCodec) passStream(ans *router.Answer, out gateway.Emitter) gateway.Result {
	out.Start(http.StatusOK, clientapi.AnswerHead(c.requestID, c.req, ans, "text/event-stream"), true)
	return clientapi.PassStream(ans, out, passDialect{})
}

// passResponse answers a non-streaming Responses request passed through
// with the response object of the stream's terminal event (which carries
// the whole response), its usage with the gateway's cost.
func (c *responsesCodec) passResponse(ans *router.Answer, out gateway.Emitter) gateway.Result {
	var last []byte
	usage, res, ok, end := clientapi.ReadWhole(ans, func(ch llm.Chunk) error {
		if responseswire.Terminal(&ch) || ch.Event == responseswire.EventCreated || ch.Event == responseswire.EventInProgress {
			last = ch.Raw
		}
		return nil
	})
	if !ok {
		return res
	}
	var events responseswire.EventReader
	ev, err := events.Read("", last)
	if err != nil || len(ev.Response) == 0 {
		return gateway.Result{Usage: usage, Answered: false, Err: &llm.Error{Code: llm.CodeAllProvidersFailed, Message: "provider " + ans.Provider + " sent no response object"}}
	}
	body := clientapi.WithCost(ev.Response, usage.Cost, "usage")
	return clientapi.WriteWhole(out, clientapi.AnswerHead(c.requestID, c.req, ans, "application/json"), usage, body, end, nil)
}
