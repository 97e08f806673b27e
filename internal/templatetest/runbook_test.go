package templatetest

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// operationsDoc is the operators' guide; its runbook has one section per
// alarm, headed "### <the alarm's logical id>", so that the section's
// GitHub anchor is the logical id in lower case (#providererrorratealarm).
const operationsDoc = "../../docs/operations.md"

var runbookHeading = regexp.MustCompile(`(?m)^### ([A-Za-z0-9]+)\s*$`)

// TestEveryAlarmHasARunbook fails when template.yaml has an alarm that
// docs/operations.md has no section for (or a section for an alarm the
// template no longer has), and when a section does not say what fires the
// alarm, what it means and what to do first.
func TestEveryAlarmHasARunbook(t *testing.T) {
	tpl := load(t)
	doc, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	alarms := tpl.resources("AWS::CloudWatch::Alarm")
	if len(alarms) == 0 {
		t.Fatal("template.yaml has no alarm: the runbook check would check nothing")
	}
	sections := map[string]string{}
	for _, m := range runbookHeading.FindAllStringSubmatchIndex(string(doc), -1) {
		name := string(doc[m[2]:m[3]])
		body := string(doc[m[1]:])
		if next := strings.Index(body, "\n#"); next >= 0 {
			body = body[:next]
		}
		sections[name] = body
	}
	isAlarm := map[string]bool{}
	for _, id := range alarms {
		isAlarm[id] = true
		body, ok := sections[id]
		if !ok {
			t.Errorf("%s: alarm %s has no runbook section: add \"### %s\" under \"## Alarms: the runbook\" (what fires it, what it means, what to do first)", operationsDoc, id, id)
			continue
		}
		for _, part := range []string{"**Fires when**", "**What it means**", "**What to do first**"} {
			if !strings.Contains(body, part) {
				t.Errorf("%s: the runbook section of %s does not say %s", operationsDoc, id, part)
			}
		}
	}
	for name := range sections {
		if strings.HasSuffix(name, "Alarm") && !isAlarm[name] {
			t.Errorf("%s: runbook section %s is for an alarm template.yaml does not have", operationsDoc, name)
		}
	}
}
