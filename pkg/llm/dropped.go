package llm

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
