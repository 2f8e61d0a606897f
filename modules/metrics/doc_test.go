package metrics

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/modules/mirror"
)

// family is what the docs and deploy files may rely on about a series.
type family struct {
	typ    string
	labels []string // sorted, cluster and broker aside
	// described: known from the registered descriptors only (the series
	// needs a role the live fixture does not run).
	described bool
}

// conditionalCollectors are collectors whose series exist only in a role
// the in-process fixture does not run: the replica series need a slave
// following a master. Their names come from the descriptors the metrics
// service registers (Describe), which is what a slave would export.
func conditionalCollectors() []prometheus.Collector {
	return []prometheus.Collector{&replicaCollector{}}
}

var descName = regexp.MustCompile(`fqName: "([^"]+)"`)

// knownFamilies scrapes the live fixture and adds the conditional
// collectors' descriptors.
func knownFamilies(t *testing.T, l *live) map[string]family {
	t.Helper()
	out := map[string]family{}
	for name, f := range l.scrape() {
		ls := map[string]bool{}
		for _, m := range f.Metric {
			for _, lp := range m.Label {
				if n := lp.GetName(); n != "cluster" && n != "broker" {
					ls[n] = true
				}
			}
		}
		fam := family{typ: strings.ToLower(f.GetType().String())}
		for n := range ls {
			fam.labels = append(fam.labels, n)
		}
		sort.Strings(fam.labels)
		out[name] = fam
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM:
			out[name+"_bucket"], out[name+"_sum"], out[name+"_count"] = fam, fam, fam
		case dto.MetricType_SUMMARY:
			out[name+"_sum"], out[name+"_count"] = fam, fam
		}
	}
	for _, c := range conditionalCollectors() {
		ch := make(chan *prometheus.Desc, 16)
		c.Describe(ch)
		close(ch)
		for d := range ch {
			m := descName.FindStringSubmatch(d.String())
			require.NotNil(t, m, d.String())
			if _, ok := out[m[1]]; !ok {
				out[m[1]] = family{typ: "gauge", described: true}
			}
		}
	}
	// The mirror's series exist only where a broker runs mirror links:
	// a sample link gives their types and labels.
	reg := prometheus.NewRegistry()
	reg.MustRegister(mirror.NewCollector(func() []mirror.LinkStatus {
		return []mirror.LinkStatus{{Name: "l", Queues: []mirror.QueueStatus{{Topic: "t", Broker: "b"}}, Topics: []mirror.TopicStatus{{Topic: "t"}}}}
	}))
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		fam := family{typ: strings.ToLower(f.GetType().String())}
		for _, lp := range f.Metric[0].Label {
			fam.labels = append(fam.labels, lp.GetName())
		}
		sort.Strings(fam.labels)
		out[f.GetName()] = fam
	}
	return out
}

var docRow = regexp.MustCompile("^\\| `(quiver_[a-z0-9_]+)` \\| ([a-z]+) \\|([^|]*)\\|")

// TestMetricsDoc: docs/METRICS.md lists every quiver_* series a broker
// and name server export, with its type and labels, and nothing else.
func TestMetricsDoc(t *testing.T) {
	l := startLive(t)
	known := knownFamilies(t, l)
	raw, err := os.ReadFile("../../docs/METRICS.md")
	require.NoError(t, err)
	documented := map[string]bool{}
	for _, line := range strings.Split(string(raw), "\n") {
		m := docRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name, typ := m[1], m[2]
		documented[name] = true
		fam, ok := known[name]
		if !assert.True(t, ok, "docs/METRICS.md lists %s, which /metrics does not export", name) {
			continue
		}
		assert.Equal(t, fam.typ, typ, "type of %s", name)
		var labels []string
		for _, f := range strings.Split(m[3], ",") {
			if f = strings.Trim(strings.TrimSpace(f), "`"); f != "" {
				labels = append(labels, f)
			}
		}
		sort.Strings(labels)
		if !fam.described {
			assert.Equal(t, fam.labels, labels, "labels of %s", name)
		}
	}
	for name, fam := range known {
		if !strings.HasPrefix(name, "quiver_") || strings.HasSuffix(name, "_bucket") || (strings.HasSuffix(name, "_sum") || strings.HasSuffix(name, "_count")) && known[strings.TrimSuffix(strings.TrimSuffix(name, "_sum"), "_count")].typ != "" {
			continue
		}
		assert.True(t, documented[name], "/metrics exports %s (%s), missing from docs/METRICS.md", name, fam.typ)
	}
	assert.Greater(t, len(documented), 25)
}
