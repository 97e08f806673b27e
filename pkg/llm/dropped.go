package llm

import "reflect"

// UnreadFields lists the top-level keys of body, a JSON object, that are
// not null and not in read, in the body's order: the fields a translation
// that reads only read leaves out. A body that is not an object has none.
func UnreadFields(body []byte, read map[string]bool) []string {
	ms, err := Members(body)
	if err != nil {
		return nil
	}
	var out []string
	for _, m := range ms {
		if !read[m.Key] && string(m.Value) != "null" {
			out = append(out, m.Key)
		}
	}
	return out
}

// JSONFields is the set of the JSON names of struct type v's fields (its
// `json` tags), for UnreadFields.
func JSONFields(v any, more ...string) map[string]bool {
	set := map[string]bool{}
	t := reflect.TypeOf(v)
	for i := range t.NumField() {
		name := t.Field(i).Tag.Get("json")
		for j := range len(name) {
			if name[j] == ',' {
				name = name[:j]
				break
			}
		}
		if name != "" && name != "-" {
			set[name] = true
		}
	}
	for _, m := range more {
		set[m] = true
	}
	return set
}
