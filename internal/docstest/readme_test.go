package docstest

import (
	"os"
	"testing"
)

// readmeLimit is the README's size bound: a landing page read in five
// minutes, with the detail in docs/.
const readmeLimit = 12 << 10

func TestReadmeIsShort(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > readmeLimit {
		t.Errorf("README.md is %d bytes, over %d: move detail into docs/", len(b), readmeLimit)
	}
}
