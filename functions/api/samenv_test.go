package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/internal/samtemplate"
)

const (
	templateFile = "../../template.yaml"
	// gatewayFunction is the function's logical id in the template, the key
	// of the --env-vars files.
	gatewayFunction = "ApiFunction"
)

// loadTemplate reads template.yaml.
func loadTemplate(t *testing.T) *samtemplate.Template {
	t.Helper()
	data, err := os.ReadFile(templateFile)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := samtemplate.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

// TestEnvFilesMatchTemplate: SAM CLI applies --env-vars only to variables
// the template declares for the function and silently drops the rest, so
// every name in the files must be declared; and the files must replace
// everything that cannot work locally (the deploy config's placeholder
// key, the {{resolve:...}} secrets, which SAM CLI leaves as literal text).
func TestEnvFilesMatchTemplate(t *testing.T) {
	tpl := loadTemplate(t)
	declared, _ := samtemplate.Get(tpl.Raw, "Resources", gatewayFunction, "Properties", "Environment", "Variables").(map[string]any)
	if len(declared) == 0 {
		t.Fatalf("%s declares no environment variables", gatewayFunction)
	}
	for _, file := range []string{"env.json", "env.dynamodb.json"} {
		raw, err := os.ReadFile(filepath.Join(eventsDir, file))
		if err != nil {
			t.Fatal(err)
		}
		var f map[string]map[string]string
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatalf("%s: %v (values must be strings)", file, err)
		}
		for fn, vars := range f {
			if fn != gatewayFunction {
				t.Errorf("%s: block %q is for no function of the gateway", file, fn)
			}
			for name := range vars {
				if _, ok := declared[name]; !ok {
					t.Errorf("%s: %s is not declared by the template for %s, so SAM CLI ignores it", file, name, gatewayFunction)
				}
			}
		}
		env, err := samtemplate.LocalEnv(tpl, gatewayFunction, raw)
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range env {
			if strings.Contains(v, "{{resolve:") {
				t.Errorf("%s: %s stays %q under SAM CLI", file, name, v)
			}
		}
		if env["BUZZGATE_CONFIG"] != "" {
			t.Errorf("%s: BUZZGATE_CONFIG = %q, want empty (the embedded demo config the sample events use)", file, env["BUZZGATE_CONFIG"])
		}
		if env["BUZZGATE_KEY_PEPPER"] == "" {
			t.Errorf("%s: no BUZZGATE_KEY_PEPPER", file)
		}
	}
}
