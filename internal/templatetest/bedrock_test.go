package templatetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// bedrockActions are the calls the bedrock adapter makes:
// InvokeModelWithResponseStream (Claude) and ConverseStream, which IAM
// authorizes as bedrock:InvokeModelWithResponseStream; InvokeModel covers
// the whole answers Bedrock authorizes under it.
var bedrockActions = []string{"bedrock:InvokeModel", "bedrock:InvokeModelWithResponseStream"}

// TestBedrockPolicyIsLeastPrivilege: the API function may call exactly the
// two invocation actions on the models BedrockModelArns lists, under a
// condition that leaves the statement out when it lists none; no function
// has any other Bedrock permission.
func TestBedrockPolicyIsLeastPrivilege(t *testing.T) {
	tpl := load(t)
	param, _ := get(tpl.raw, "Parameters", "BedrockModelArns").(map[string]any)
	if param["Type"] != "CommaDelimitedList" || param["Default"] != "" {
		t.Errorf("parameter BedrockModelArns: %v, want a CommaDelimitedList defaulting to empty", param)
	}
	cond := fmt.Sprint(get(tpl.raw, "Conditions", "HasBedrockModels"))
	if !strings.Contains(cond, "Fn::Not") || !strings.Contains(cond, "BedrockModelArns") {
		t.Errorf("condition HasBedrockModels: %s", cond)
	}
	found := 0
	for _, id := range tpl.resources("AWS::Serverless::Function") {
		for i, policy := range list(get(tpl.props(id), "Policies")) {
			at := fmt.Sprintf("%s: Policies[%d]", id, i)
			m, _ := policy.(map[string]any)
			if ifs, ok := m["Fn::If"].([]any); ok {
				if functionKind(t, id) != kindAPI || len(ifs) != 3 || ifs[0] != "HasBedrockModels" || !isRef(ifs[2], "AWS::NoValue") {
					t.Errorf("%s: a conditional policy other than the API function's Bedrock one: %v", at, m)
					continue
				}
				doc, _ := ifs[1].(map[string]any)
				stmts := list(doc["Statement"])
				if len(stmts) != 1 {
					t.Errorf("%s: %d statements, want 1", at, len(stmts))
					continue
				}
				s, _ := stmts[0].(map[string]any)
				actions, _ := stringList(s["Action"])
				slices.Sort(actions)
				if diff := cmp.Diff(bedrockActions, actions); diff != "" || s["Effect"] != "Allow" || !isRef(s["Resource"], "BedrockModelArns") {
					t.Errorf("%s: statement %v; actions (-want +got):\n%s", at, s, diff)
				}
				found++
				continue
			}
			if strings.Contains(strings.ToLower(fmt.Sprint(policy)), "bedrock") {
				t.Errorf("%s: another policy names Bedrock: %v", at, policy)
			}
		}
	}
	if found != 1 {
		t.Errorf("%d Bedrock statements, want 1 on the API function", found)
	}
}

// TestDashboardShowsEveryAlarm: the dashboard's alarm widget lists every
// alarm the template defines.
func TestDashboardShowsEveryAlarm(t *testing.T) {
	tpl := load(t)
	body, ok := subText(tpl.props(tpl.one(t, "AWS::CloudWatch::Dashboard"))["DashboardBody"])
	if !ok {
		t.Fatal("no DashboardBody")
	}
	alarms := tpl.resources("AWS::CloudWatch::Alarm")
	if len(alarms) == 0 {
		t.Fatal("no alarms")
	}
	for _, id := range alarms {
		if !strings.Contains(body, "${"+id+".Arn}") {
			t.Errorf("alarm %s is not on the dashboard", id)
		}
	}
}
