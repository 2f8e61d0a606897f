package broker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/quivermq/quiver/core/filter"
	"github.com/quivermq/quiver/core/message"
	"github.com/quivermq/quiver/core/protocol"
	"github.com/quivermq/quiver/core/remoting"
)

func TestFiltersPropertyFilter(t *testing.T) {
	tests := []struct {
		name     string
		give     map[string]any
		wantSQL  bool // SQL92 compiles
		wantTags bool // TAG compiles
	}{
		{"default", nil, true, true},
		{"true", map[string]any{"filter.property_filter": true}, true, true},
		{"false", map[string]any{"filter.property_filter": false}, false, true},
		{"false as an env or --set string", map[string]any{"filter.property_filter": "false"}, false, true},
		{"false beside plugin sections", map[string]any{"filter": map[string]any{"property_filter": false, "sql92": map[string]any{"max_length": 100}, "tag": map[string]any{}}}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			filters := stockFilters(t, tt.give)
			_, err := filters[filter.TypeSQL92].Compile("a > 5")
			if tt.wantSQL {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, ErrPropertyFilterOff)
				assert.EqualError(t, err, "broker: filter.property_filter is false: this broker serves TAG expressions only (SQL92 refused)")
			}
			m, err := filters[filter.TypeTag].Compile("A || B")
			require.NoError(t, err)
			assert.True(t, m.Match(message.Properties{"TAGS": "B"}))
		})
	}
}

func TestFilterPlanErrors(t *testing.T) {
	tests := []struct {
		name string
		give map[string]any
		want string
	}{
		{"misspelt switch", map[string]any{"filter.property_fliter": false}, "unknown key filter.property_fliter; did you mean filter.property_filter?"},
		{"unknown plugin section", map[string]any{"filter.regex.x": 1, "filter.sq92.max_length": 1}, "unknown key filter.regex\nunknown key filter.sq92; did you mean filter.sql92?"},
		{"bad switch value", map[string]any{"filter.property_filter": "maybe"}, "filter.property_filter"},
		{"plugin keys stay strict", map[string]any{"filter.sql92.max_lenght": 1}, "unknown key filter.sql92.max_lenght"}, //nolint:misspell // the typo is the test: an unknown key
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := filterPlan(tt.give)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
}

func TestPropertyFilterOffRefusesSubscriptions(t *testing.T) {
	h := startBrokerFilters(t, map[string]any{"filter.property_filter": false})
	resp := h.subscribe("c1", "CGP", protocol.SubscriptionData{Topic: "PF", SubString: "a > 5", ExpressionType: filter.TypeSQL92})
	assert.Equal(t, remoting.SubscriptionParseFailed, resp.Code)
	assert.Contains(t, resp.Remark, "filter.property_filter is false")
	assert.Contains(t, resp.Remark, "SQL92 refused")
	assert.Empty(t, h.b.clients.consumerIDs("CGP"))

	ext := pullExt("CGP", "PF", 0, 0, pullSubscription, 0)
	ext["expressionType"], ext["subscription"] = filter.TypeSQL92, "a > 5"
	require.Equal(t, remoting.Success, h.send("PF", 0, "x", message.Properties{"a": "7"}).Code)
	resp = h.invoke(remoting.PullMessage, ext, nil)
	assert.Equal(t, remoting.SubscriptionParseFailed, resp.Code)
	assert.Contains(t, resp.Remark, "filter.property_filter is false")

	// TAG subscriptions are still served.
	resp = h.subscribe("c2", "CGT", protocol.SubscriptionData{Topic: "PF", SubString: "*", ExpressionType: filter.TypeTag})
	require.Equal(t, remoting.Success, resp.Code, resp.Remark)
	assert.Equal(t, []string{"x"}, h.pullBodies(pullExt("CGT", "PF", 0, 0, 0, 0)))
}
