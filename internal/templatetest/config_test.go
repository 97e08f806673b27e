package templatetest

import (
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/buzzgate/buzzgate/pkg/catalog"
)

// TestDeployConfigIsValid loads deploy/config.yaml the way the function
// does at cold start: a config that fails here would stop every cold start.
func TestDeployConfigIsValid(t *testing.T) {
	cfg, err := catalog.Load(configPath)
	if err != nil {
		t.Fatal(err)
	}
	bedrock := false
	for i, p := range cfg.Providers {
		if p.API == "bedrock" {
			// Signed with the function's role: no key, no base_url.
			bedrock = true
			if p.APIKeyEnv != "" || p.BaseURL != "" || p.AWSRegion == "" {
				t.Errorf("providers[%d] (%s): a bedrock provider wants aws_region and neither api_key_env nor base_url", i, p.Name)
			}
			continue
		}
		if p.API != "openai" {
			t.Errorf("providers[%d] (%s): api %q: production providers are real upstreams (api: openai or bedrock)", i, p.Name, p.API)
			continue
		}
		if u, err := url.Parse(p.BaseURL); err != nil || u.Scheme != "https" {
			t.Errorf("providers[%d] (%s): base_url %q: want https", i, p.Name, p.BaseURL)
		}
		if p.APIKeyEnv == "" {
			t.Errorf("providers[%d] (%s): no api_key_env", i, p.Name)
		}
	}
	fallback := false
	for _, m := range cfg.Models {
		fallback = fallback || len(m.Routes) >= 2
	}
	if !fallback {
		t.Error("no model has two routes: the example should show fallback")
	}
	if !bedrock {
		t.Error("no bedrock provider: the example should show the deployment's own cloud")
	}
}

// TestBuildShipsConfig checks that the function's build copies
// deploy/config.yaml to where BUZZGATE_CONFIG points (/var/task is the
// unpacked artifact).
func TestBuildShipsConfig(t *testing.T) {
	makefile, err := os.ReadFile(makefilePath)
	if err != nil {
		t.Fatal(err)
	}
	tpl := load(t)
	for _, id := range tpl.resources("AWS::Serverless::Function") {
		path, _ := get(tpl.props(id), "Environment", "Variables", "BUZZGATE_CONFIG").(string)
		rel, ok := strings.CutPrefix(path, "/var/task/")
		if !ok {
			continue
		}
		recipe := targetRecipe(string(makefile), "build-"+id)
		if !strings.Contains(recipe, "deploy/config.yaml") || !strings.Contains(recipe, "$(ARTIFACTS_DIR)/"+rel) {
			t.Errorf("%s: BUZZGATE_CONFIG=%s, but the Makefile's build-%s does not copy deploy/config.yaml to $(ARTIFACTS_DIR)/%s: the deployed function would have no config", id, path, id, rel)
		}
	}
}

// targetRecipe returns the recipe lines of a Makefile target (of its rule
// with a recipe: a target-specific variable's line has none).
func targetRecipe(makefile, target string) string {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:.*\n((?:\t.*\n?)*)`)
	for _, m := range re.FindAllStringSubmatch(makefile, -1) {
		if m[1] != "" {
			return m[1]
		}
	}
	return ""
}

// TestSamconfigBuildsWithoutCache: SAM's build cache keys on a hash of the
// whole directory (.tools/ and .git/ included) when it builds in source, so
// samconfig.toml turns it off in every environment.
func TestSamconfigBuildsWithoutCache(t *testing.T) {
	data, err := os.ReadFile("../../samconfig.toml")
	if err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(string(data), "\n") {
		key, value, ok := strings.Cut(strings.TrimSpace(line), "=")
		if ok && strings.TrimSpace(key) == "cached" && strings.TrimSpace(value) != "false" {
			t.Errorf("samconfig.toml:%d: %s (the cache hashes .tools/ and .git/ too)", i+1, strings.TrimSpace(line))
		}
	}
	if !strings.Contains(string(data), "build_in_source = true") {
		t.Error("samconfig.toml does not build in source (the Makefile writes only to ARTIFACTS_DIR)")
	}
}
