package mirror

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	descLagMessages = prometheus.NewDesc("quiver_mirror_lag_messages", "Messages of a source queue a mirror link has yet to write to the target.", []string{"link", "topic", "source_broker", "queue"}, nil)
	descLagSeconds  = prometheus.NewDesc("quiver_mirror_lag_seconds", "Age of the oldest message of a source queue a mirror link has yet to write (0 when caught up).", []string{"link", "topic", "source_broker", "queue"}, nil)
	descMessages    = prometheus.NewDesc("quiver_mirror_messages_total", "Messages a mirror link wrote to the target, by source topic (copies the target refused included).", []string{"link", "topic"}, nil)
	descBytes       = prometheus.NewDesc("quiver_mirror_bytes_total", "Body bytes a mirror link wrote to the target, by source topic.", []string{"link", "topic"}, nil)
	descUp          = prometheus.NewDesc("quiver_mirror_link_up", "1 while a mirror link's last exchange with both clusters worked, else 0.", []string{"link"}, nil)
	descReconnects  = prometheus.NewDesc("quiver_mirror_reconnects_total", "Times a mirror link came back after a failure.", []string{"link"}, nil)
	descLoop        = prometheus.NewDesc("quiver_mirror_loop_skipped_total", "Messages a mirror link left out because they came from the target cluster (active-active).", []string{"link"}, nil)
	descCkptAge     = prometheus.NewDesc("quiver_mirror_checkpoint_age_seconds", "Time since a mirror link last wrote its checkpoint to the target.", []string{"link"}, nil)
)

// Collector exports the links' state as Prometheus series
// (docs/METRICS.md lists them); a nil Service exports none.
func (s *Service) Collector() prometheus.Collector {
	if s == nil {
		return NewCollector(func() []LinkStatus { return nil })
	}
	return NewCollector(s.Status)
}

// NewCollector exports the links status returns, read at each scrape.
func NewCollector(status func() []LinkStatus) prometheus.Collector { return collector{status} }

type collector struct{ status func() []LinkStatus }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLagMessages, descLagSeconds, descMessages, descBytes, descUp, descReconnects, descLoop, descCkptAge} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	for _, st := range c.status() {
		up := 0.0
		if st.Up {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, up, st.Name)
		ch <- prometheus.MustNewConstMetric(descReconnects, prometheus.CounterValue, float64(st.Reconnects), st.Name)
		ch <- prometheus.MustNewConstMetric(descLoop, prometheus.CounterValue, float64(st.LoopSkipped), st.Name)
		ch <- prometheus.MustNewConstMetric(descCkptAge, prometheus.GaugeValue, st.CheckpointAge, st.Name)
		for _, q := range st.Queues {
			qid := strconv.Itoa(q.Queue)
			ch <- prometheus.MustNewConstMetric(descLagMessages, prometheus.GaugeValue, float64(q.LagMessages), st.Name, q.Topic, q.Broker, qid)
			ch <- prometheus.MustNewConstMetric(descLagSeconds, prometheus.GaugeValue, q.LagSeconds, st.Name, q.Topic, q.Broker, qid)
		}
		for _, t := range st.Topics {
			ch <- prometheus.MustNewConstMetric(descMessages, prometheus.CounterValue, float64(t.Messages), st.Name, t.Topic)
			ch <- prometheus.MustNewConstMetric(descBytes, prometheus.CounterValue, float64(t.Bytes), st.Name, t.Topic)
		}
	}
}
