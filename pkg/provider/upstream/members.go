package upstream

import "github.com/buzzgate/buzzgate/internal/jsonobj"

// IsNull reports whether v, spaces aside, is absent or null
// (jsonobj.IsNull).
func IsNull(v []byte) bool { return jsonobj.IsNull(v) }
