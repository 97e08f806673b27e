package httpapi

import (
	"github.com/buzzgate/buzzgate/pkg/clientapi"
	"github.com/buzzgate/buzzgate/pkg/router"
)

// objectRef is the request body's first reference to an object stored in
// a provider's account (API.ProviderObject: a file, a container, a stored
// conversation...), or nil.
func objectRef(api clientapi.API, body []byte) *clientapi.ObjectRef {
	if ref, ok := api.ProviderObject(body); ok {
		return &ref
	}
	return nil
}

// scopeObjects keeps a request that refers to an object stored in a
// provider's account (ref, when not nil) away from the providers that do
// not accept such references: they leave the plan, and when none is left
// the request is a 400 naming the field, before the idempotency lookup and
// any provider call. An upstream account is the operator's, shared by every project, so
// a reference the client chooses could name another project's object; a
// provider with provider_objects: allow is one whose operator accepts
// that. A plan already empty (the data policy or residency left nobody)
// is left to its 503.
func scopeObjects(ref *clientapi.ObjectRef, plan *router.Plan) error {
	if ref == nil || len(plan.Candidates) == 0 {
		return nil
	}
	kept := plan.Candidates[:0:0]
	for _, c := range plan.Candidates {
		if c.Provider.AllowsProviderObjects() {
			kept = append(kept, c)
		}
	}
	if len(kept) == 0 {
		return ref.Refused(plan.Model.ID)
	}
	plan.Candidates = kept
	return nil
}
