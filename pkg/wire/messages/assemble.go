package messages

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/buzzgate/buzzgate/internal/jsonstr"
	"github.com/buzzgate/buzzgate/pkg/llm"
)

// Assembler builds the Message a stream passed through streams, from its
// events: message_start's message with its content blocks built from their
// start and deltas, and message_delta's stop reason, stop sequence and
// usage (with the gateway's cost). Fields the gateway does not know are
// kept: a block keeps every field of its start, and a delta of a type the
// gateway does not know appends its string fields to the block's fields
// of the same name and sets the others. The zero Assembler is ready.
type Assembler struct {
	message0 []llm.Member // message_start's message
	blocks   []*blockAsm
	delta    []llm.Member // message_delta's delta
	usage    []llm.Member // message_delta's usage
}

type blockAsm struct {
	start   []llm.Member
	strings map[string]*strings.Builder // accumulated string fields
	order   []string
	set     map[string][]byte // raw fields set by deltas
	json    strings.Builder   // input_json_delta's partial_json
	hasJSON bool
	cites   [][]byte
}

// Add takes one event's data.
func (m *Assembler) Add(raw []byte) {
	if !m.addDelta(raw) {
		m.addEvent(raw)
	}
}

// addEvent takes any event, decoded in full.
func (m *Assembler) addEvent(raw []byte) {
	var ev RawEvent
	if json.Unmarshal(raw, &ev) != nil {
		return
	}
	switch ev.Type {
	case EventMessageStart:
		m.message0, _ = llm.Members(ev.Message)
	case EventContentBlockStart:
		ms, err := llm.Members(ev.ContentBlock)
		if err != nil || ev.Index < 0 || ev.Index > 1<<16 {
			return
		}
		for len(m.blocks) <= ev.Index {
			m.blocks = append(m.blocks, nil)
		}
		m.blocks[ev.Index] = &blockAsm{start: ms, strings: map[string]*strings.Builder{}, set: map[string][]byte{}}
	case EventContentBlockDelta:
		if ev.Index < 0 || ev.Index >= len(m.blocks) || m.blocks[ev.Index] == nil {
			return
		}
		m.blocks[ev.Index].add(ev.Delta)
	case EventMessageDelta:
		if ms, err := llm.Members(ev.Delta); err == nil {
			m.delta = append(m.delta, ms...)
		}
		if ms, err := llm.Members(ev.Usage); err == nil {
			m.usage = append(m.usage, ms...)
		}
	}
}

// addDelta takes a content_block_delta, most of a stream's events, from
// its members as split, without decoding the event: it reports false for
// any other event, and for one whose type, index or delta it cannot read
// at a glance (a key given twice or in other case, an index that is not a
// plain integer), which add then decodes in full.
func (m *Assembler) addDelta(raw []byte) bool {
	var typ, index, delta []byte
	odd := false
	if !llm.EachMember(raw, func(f llm.Member) bool {
		var dst *[]byte
		switch f.Key {
		case "type":
			dst = &typ
		case "index":
			dst = &index
		case "delta":
			dst = &delta
		default:
			odd = strings.EqualFold(f.Key, "type") || strings.EqualFold(f.Key, "index") || strings.EqualFold(f.Key, "delta")
			return !odd
		}
		if *dst != nil {
			odd = true
			return false
		}
		*dst = f.Value
		return true
	}) || odd {
		return false
	}
	if string(typ) != `"`+EventContentBlockDelta+`"` {
		return false
	}
	i, err := strconv.Atoi(string(index))
	if err != nil {
		return false
	}
	if i >= 0 && i < len(m.blocks) && m.blocks[i] != nil {
		m.blocks[i].add(delta)
	}
	return true
}

// appendString appends the JSON string raw, decoded, to sb; false when raw
// is not a string.
func appendString(sb *strings.Builder, raw []byte) bool {
	if plainString(raw) {
		sb.Write(raw[1 : len(raw)-1])
		return true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return false
	}
	sb.WriteString(s)
	return true
}

// plainString reports whether raw is a JSON string that is its own
// decoding between its quotes: no escape, no control character, UTF-8.
func plainString(raw []byte) bool {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return false
	}
	for _, c := range raw[1 : len(raw)-1] {
		if c < 0x20 || c == '\\' || c == '"' {
			return false
		}
	}
	return utf8.Valid(raw)
}

func (b *blockAsm) add(delta json.RawMessage) {
	typ := ""
	if !llm.EachMember(delta, func(f llm.Member) bool {
		if f.Key == "type" {
			if plainString(f.Value) {
				typ = string(f.Value[1 : len(f.Value)-1])
			} else {
				_ = json.Unmarshal(f.Value, &typ)
			}
		}
		return true
	}) {
		return
	}
	llm.EachMember(delta, func(f llm.Member) bool {
		switch {
		case f.Key == "type":
		case typ == DeltaInputJSON && f.Key == "partial_json":
			if appendString(&b.json, f.Value) {
				b.hasJSON = true
			}
		case typ == DeltaCitations && f.Key == "citation":
			b.cites = append(b.cites, f.Value)
		case typ == DeltaSignature && f.Key == "signature":
			b.set["signature"] = f.Value
		case len(f.Value) > 0 && f.Value[0] == '"':
			sb := b.strings[f.Key]
			if sb == nil {
				sb = new(strings.Builder)
			}
			if appendString(sb, f.Value) && b.strings[f.Key] == nil {
				b.strings[f.Key] = sb
				b.order = append(b.order, f.Key)
			}
		default:
			b.set[f.Key] = f.Value
		}
		return true
	})
}

func (b *blockAsm) block() []byte {
	set := make(map[string][]byte, len(b.set)+len(b.strings)+2)
	for k, v := range b.set {
		set[k] = v
	}
	for _, k := range b.order {
		prior := ""
		for _, f := range b.start {
			if f.Key == k {
				_ = json.Unmarshal(f.Value, &prior)
			}
		}
		set[k] = jsonstr.Append(nil, prior+b.strings[k].String(), false)
	}
	if b.hasJSON {
		if in := []byte(b.json.String()); len(in) == 0 || !json.Valid(in) {
			set["input"] = []byte("{}")
		} else {
			set["input"] = in
		}
	}
	if len(b.cites) > 0 {
		list := []byte{'['}
		for _, f := range b.start {
			if f.Key == "citations" && len(f.Value) > 2 && f.Value[0] == '[' {
				list = append(list, f.Value[1:len(f.Value)-1]...)
				list = append(list, ',')
			}
		}
		for i, c := range b.cites {
			if i > 0 {
				list = append(list, ',')
			}
			list = append(list, c...)
		}
		set["citations"] = append(list, ']')
	}
	return llm.Splice(b.start, 64, set)
}

// Message is the assembled Message, its usage with the gateway's cost.
func (m *Assembler) Message(u llm.Usage) []byte {
	content := []byte{'['}
	n := 0
	for _, b := range m.blocks {
		if b == nil {
			continue
		}
		if n > 0 {
			content = append(content, ',')
		}
		n++
		content = append(content, b.block()...)
	}
	content = append(content, ']')
	set := map[string][]byte{"content": content}
	for _, f := range m.delta {
		set[f.Key] = f.Value
	}
	var usage []llm.Member
	for _, f := range m.message0 {
		if f.Key == "usage" {
			usage, _ = llm.Members(f.Value)
		}
	}
	uset := map[string][]byte{}
	for _, f := range m.usage {
		uset[f.Key] = f.Value
	}
	cost, _ := json.Marshal(llm.USD(u.Cost))
	uset["cost"] = cost
	set["usage"] = llm.Splice(usage, 64, uset)
	return llm.Splice(m.message0, 256, set)
}
