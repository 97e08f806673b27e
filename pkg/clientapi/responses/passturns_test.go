package responses

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/buzzgate/buzzgate/pkg/clientapi/clientapitest"
	"github.com/buzzgate/buzzgate/pkg/idempotency"
	"github.com/buzzgate/buzzgate/pkg/idempotency/memstore"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// passService is a Responses service with a memory store.
func passService() *Service {
	return New(Deps{Idempotency: idempotency.New(memstore.New(1<<20), idempotency.Config{}, nil, nil), Now: time.Now, Log: slog.New(slog.DiscardHandler)})
}

const passedMessage = `{"id":"msg_9","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"Paris."}]}`

// A stream passed through is kept at its terminal event, under the
// provider's id, for its project only, with its input and output as Chat
// Completions messages; the event then says store true. What cannot be
// continued as it was (a built-in tool's call in the output), a failed
// answer and one asked with store false are not kept and say store false.
func TestPassEmitterKeepsTheTurn(t *testing.T) {
	for _, tc := range []struct {
		name, body, event, output string
		kept                      bool
		messages                  string
	}{
		{"completed", `{"model":"m","input":"capital of France?"}`, "response.completed", passedMessage, true,
			`[{"role":"user","content":"capital of France?"},{"role":"assistant","content":[{"type":"text","text":"Paris."}]}]`},
		{"function call", `{"model":"m","input":[{"role":"user","content":"weather?"}]}`, "response.completed",
			`{"id":"rs_9","type":"reasoning","summary":[]},{"id":"fc_9","type":"function_call","status":"completed","call_id":"call_1","name":"weather","arguments":"{}"}`, true,
			`[{"role":"user","content":"weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{}"}}]}]`},
		{"incomplete", `{"model":"m","input":"capital of France?"}`, "response.incomplete", passedMessage, true,
			`[{"role":"user","content":"capital of France?"},{"role":"assistant","content":[{"type":"text","text":"Paris."}]}]`},
		{"built-in tool call", `{"model":"m","input":"news?","tools":[{"type":"web_search"}]}`, "response.completed",
			`{"id":"ws_9","type":"web_search_call","status":"completed","action":{"type":"search","query":"news"}},` + passedMessage, false, ""},
		{"failed", `{"model":"m","input":"capital of France?"}`, "response.failed", passedMessage, false, ""},
		{"store false", `{"model":"m","store":false,"input":"capital of France?"}`, "response.completed", passedMessage, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := passService()
			status := strings.TrimPrefix(tc.event, "response.")
			data := `{"type":"` + tc.event + `","sequence_number":7,"response":{"id":"resp_up_9","object":"response","status":"` + status + `","store":true,"output":[` + tc.output + `],"usage":{"input_tokens":3,"output_tokens":2,"cost":0.1}}}`
			out := &clientapitest.RecordingEmitter{}
			e := &passEmitter{Emitter: out, k: &turnKeeper{s: s, project: "a", want: true, body: []byte(tc.body)}}
			if err := e.Event(idempotency.Event{Name: tc.event, Data: []byte(data)}, true); err != nil {
				t.Fatal(err)
			}
			var sent struct {
				Sequence int `json:"sequence_number"`
				Response struct {
					ID    string `json:"id"`
					Store bool   `json:"store"`
				} `json:"response"`
			}
			got := strings.TrimPrefix(out.Events[0], tc.event+" ")
			if err := json.Unmarshal([]byte(got), &sent); err != nil || sent.Sequence != 7 || sent.Response.ID != "resp_up_9" || sent.Response.Store != tc.kept {
				t.Errorf("event sent: %s, want store %v", got, tc.kept)
			}
			turn, err := s.readTurn(context.Background(), "a", "resp_up_9")
			if !tc.kept {
				if err == nil {
					t.Errorf("kept: %s", turn.Response)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			msgs, _ := json.Marshal(turn.Messages)
			if string(msgs) != tc.messages || turn.N != 1 || !strings.Contains(string(turn.Response), `"cost":0.1`) {
				t.Errorf("kept turn %d: messages %s, want %s; response %s", turn.N, msgs, tc.messages, turn.Response)
			}
			if _, err := s.readTurn(context.Background(), "b", "resp_up_9"); err == nil {
				t.Error("another project reads the turn")
			}
		})
	}
}

// A JSON answer passed through is kept from its whole body, which then
// says whether it was.
func TestPassEmitterKeepsAWholeAnswer(t *testing.T) {
	s := passService()
	out := &clientapitest.RecordingEmitter{}
	e := &passEmitter{Emitter: out, k: &turnKeeper{s: s, project: "a", want: true, body: []byte(`{"model":"m","input":"capital of France?"}`)}}
	out.Price(llm.Usage{})
	e.Body([]byte(`{"id":"resp_up_1","object":"response","status":"completed","output":[` + passedMessage + `]}` + "\n"))
	if got := string(out.Whole); !strings.HasSuffix(got, `,"store":true}`+"\n") {
		t.Errorf("body sent: %s", got)
	}
	if _, err := s.readTurn(context.Background(), "a", "resp_up_1"); err != nil {
		t.Errorf("not kept: %v", err)
	}
}
