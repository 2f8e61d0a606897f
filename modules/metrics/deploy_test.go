package metrics

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

var (
	promString   = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promMatchers = regexp.MustCompile(`\{[^{}]*\}`)
	promRange    = regexp.MustCompile(`\[[^\[\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	labelValues  = regexp.MustCompile(`^\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)
)

// promKeywords are PromQL words that are not metric names when they are
// not followed by '(' (functions always are).
var promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true, "Inf": true, "NaN": true}

// metricNames returns the metric names a PromQL expression reads: the
// identifiers left once string literals, label matchers, range and
// subquery selectors and grouping clauses are removed, that are neither
// functions (followed by '(') nor keywords. A Grafana variable query
// label_values(expr, label) yields expr's names; its label is returned
// apart. Grafana variables ($topic, $__rate_interval) only appear inside
// the removed parts.
func metricNames(expr string) (names []string, label string) {
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		expr, label = m[1], m[2]
	}
	s := promString.ReplaceAllString(expr, `""`)
	s = promMatchers.ReplaceAllString(s, " ")
	s = promRange.ReplaceAllString(s, " ")
	s = promGrouping.ReplaceAllString(s, " ")
	seen := map[string]bool{}
	for _, loc := range promIdent.FindAllStringIndex(s, -1) {
		id := s[loc[0]:loc[1]]
		if loc[0] > 0 {
			prev := s[loc[0]-1]
			if prev == '$' || prev == '.' || prev >= '0' && prev <= '9' {
				continue // a variable, or the exponent or unit of a number
			}
		}
		rest := strings.TrimLeft(s[loc[1]:], " \t\n")
		if strings.HasPrefix(rest, "(") || promKeywords[id] || seen[id] {
			continue
		}
		seen[id] = true
		names = append(names, id)
	}
	sort.Strings(names)
	return names, label
}

func TestMetricNames(t *testing.T) {
	tests := []struct {
		give      string
		want      []string
		wantLabel string
	}{
		{give: `quiver_a`, want: []string{"quiver_a"}},
		{give: `sum by (group, topic) (rate(quiver_x_total{topic=~"a|b", group!="c{d}"}[5m])) / quiver_y`, want: []string{"quiver_x_total", "quiver_y"}},
		{give: `1 - quiver_disk_free_bytes{cluster=~"$cluster"} / quiver_disk_total_bytes > 0.85`, want: []string{"quiver_disk_free_bytes", "quiver_disk_total_bytes"}},
		{give: "histogram_quantile(0.99, sum by (le) (rate(quiver_s_bucket[$__rate_interval])))", want: []string{"quiver_s_bucket"}},
		{give: `quiver_f > 0 or increase(quiver_g_total[1h]) > 0 and on (broker) up`, want: []string{"quiver_f", "quiver_g_total", "up"}},
		{give: `predict_linear(quiver_free[6h], 24 * 3600) < 1e9`, want: []string{"quiver_free"}},
		{give: `label_values(quiver_topic_max_offset{cluster=~"$cluster"}, broker)`, want: []string{"quiver_topic_max_offset"}, wantLabel: "broker"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			got, label := metricNames(tt.give)
			assert.Equal(t, tt.want, got)
			assert.Equal(t, tt.wantLabel, label)
		})
	}
}

// deployQuery is one PromQL expression of a deploy file and where it is.
type deployQuery struct{ where, expr string }

func dashboardQueries(t *testing.T, path string) []deployQuery {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var d struct {
		UID    string `json:"uid"`
		Panels []struct {
			ID         int             `json:"id"`
			Title      string          `json:"title"`
			Type       string          `json:"type"`
			Datasource json.RawMessage `json:"datasource"`
			GridPos    *struct {
				H, W, X, Y int
			} `json:"gridPos"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	require.NoError(t, json.Unmarshal(raw, &d), "%s", path)
	require.NotEmpty(t, d.UID, "%s: the dashboard needs a uid (stable links, re-imports replace it)", path)
	for i, p := range d.Panels {
		for _, q := range d.Panels[:i] {
			if p.GridPos != nil && q.GridPos != nil {
				a, b := p.GridPos, q.GridPos
				overlap := a.X < b.X+b.W && b.X < a.X+a.W && a.Y < b.Y+b.H && b.Y < a.Y+a.H
				assert.False(t, overlap, "%s: panels %q and %q overlap", path, p.Title, q.Title)
			}
		}
	}
	var out []deployQuery
	ids := map[int]bool{}
	for _, p := range d.Panels {
		assert.False(t, ids[p.ID], "%s: panel id %d used twice", path, p.ID)
		ids[p.ID] = true
		require.NotNil(t, p.GridPos, "%s: panel %q has no gridPos", path, p.Title)
		assert.True(t, p.GridPos.W > 0 && p.GridPos.X+p.GridPos.W <= 24, "%s: panel %q is outside the 24-column grid", path, p.Title)
		if p.Type == "row" {
			continue
		}
		assert.Contains(t, string(p.Datasource), "${datasource}", "%s: panel %q does not use the data source variable", path, p.Title)
		require.NotEmpty(t, p.Targets, "%s: panel %q has no query", path, p.Title)
		for _, tg := range p.Targets {
			require.NotEmpty(t, tg.Expr, "%s: panel %q has an empty query", path, p.Title)
			out = append(out, deployQuery{where: "panel " + p.Title, expr: tg.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			require.NoError(t, json.Unmarshal(v.Query, &q.Query), "%s: variable %s", path, v.Name)
		}
		out = append(out, deployQuery{where: "variable " + v.Name, expr: q.Query})
	}
	return out
}

func alertQueries(t *testing.T, path string) []deployQuery {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var f struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Record      string            `yaml:"record"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&f), "%s", path)
	var out []deployQuery
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "%s: group %s has a rule without alert", path, g.Name)
			require.NotEmpty(t, r.Expr, "%s: alert %s has no expr", path, r.Alert)
			assert.NotEmpty(t, r.Labels["severity"], "%s: alert %s has no severity label", path, r.Alert)
			assert.NotEmpty(t, r.Annotations["summary"], "%s: alert %s has no summary", path, r.Alert)
			out = append(out, deployQuery{where: "alert " + r.Alert, expr: r.Expr})
		}
	}
	return out
}

// TestDeployQueries: every metric name in every query of the Grafana
// dashboard (deploy/grafana/quiver.json, panels and variables) and of the
// alert rules (deploy/prometheus/alerts.yml) is a series a live broker
// and name server export on /metrics (the replica series from the
// descriptors a slave exports), every label_values label exists on its
// series, and both files cover what operators watch.
func TestDeployQueries(t *testing.T) {
	l := startLive(t)
	known := knownFamilies(t, l)
	files := map[string][]deployQuery{
		"deploy/grafana/quiver.json":   dashboardQueries(t, "../../deploy/grafana/quiver.json"),
		"deploy/prometheus/alerts.yml": alertQueries(t, "../../deploy/prometheus/alerts.yml"),
	}
	used := map[string]map[string]bool{}
	for file, qs := range files {
		used[file] = map[string]bool{}
		require.NotEmpty(t, qs, file)
		for _, q := range qs {
			names, label := metricNames(q.expr)
			assert.NotEmpty(t, names, "%s %s: no metric in %q", file, q.where, q.expr)
			for _, n := range names {
				used[file][n] = true
				fam, ok := known[n]
				if !assert.True(t, ok, "%s %s reads %s, which /metrics does not export (query %q)", file, q.where, n, q.expr) {
					continue
				}
				if label != "" && label != "cluster" && label != "broker" && !fam.described {
					assert.Contains(t, fam.labels, label, "%s %s: %s has no label %s", file, q.where, n, label)
				}
			}
		}
	}
	for _, n := range []string{
		"quiver_messages_in_total", "quiver_consumer_messages_total", // produce and consume rates
		"quiver_consumer_lag_messages", "quiver_consumer_delay_seconds", // lag, delay by store time
		"quiver_disk_free_bytes", "quiver_disk_total_bytes", "quiver_broker_busy_total",
		"quiver_replica_lag_bytes", "quiver_store_corruption_findings",
	} {
		assert.True(t, used["deploy/grafana/quiver.json"][n], "the dashboard has no panel on %s", n)
	}
	for _, n := range []string{
		"quiver_consumer_lag_messages", "quiver_disk_free_bytes", "quiver_broker_busy_total",
		"quiver_replica_lag_bytes", "quiver_store_corruption_findings", "quiver_store_writes_refused",
	} {
		assert.True(t, used["deploy/prometheus/alerts.yml"][n], "no alert rule on %s", n)
	}
}
