package templatetest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// alarmName is an alarm's logical id as the docs quote it: `SomethingAlarm`.
var alarmName = regexp.MustCompile("`([A-Z][A-Za-z0-9]*Alarm)`")

// TestDocsListEveryAlarm fails when a doc names an alarm template.yaml does
// not have, or lists alarms (a line naming two or more) without naming
// every alarm the template has: a list of the alarms is the whole list.
func TestDocsListEveryAlarm(t *testing.T) {
	alarms := load(t).resources("AWS::CloudWatch::Alarm")
	if len(alarms) < 2 {
		t.Fatalf("template.yaml has %d alarms: the check would check nothing", len(alarms))
	}
	docs, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, "../../README.md", "../../deploy/README.md")
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(b), "\n") {
			var named []string
			for _, m := range alarmName.FindAllStringSubmatch(line, -1) {
				if !slices.Contains(named, m[1]) {
					named = append(named, m[1])
				}
			}
			for _, a := range named {
				if !slices.Contains(alarms, a) {
					t.Errorf("%s:%d names %s, which template.yaml does not have", doc, n+1, a)
				}
			}
			if len(named) < 2 {
				continue
			}
			for _, a := range alarms {
				if !slices.Contains(named, a) {
					t.Errorf("%s:%d lists alarms without %s", doc, n+1, a)
				}
			}
		}
	}
}
