package throttle

import (
	"fmt"
	"io"
	"math"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
)

// Names of the series WriteMetrics writes, labelled command (audit,
// migrate): the pace of the run when the file was written.
const (
	// MetricRate: the current rate in cells a second (+Inf while
	// unlimited: no ceiling and no RESOURCE_EXHAUSTED yet).
	MetricRate = "bttl_throttle_rate_cells_per_second"
	// MetricCeiling: -cells-per-second (0: none).
	MetricCeiling = "bttl_throttle_ceiling_cells_per_second"
	// MetricThrottled: RESOURCE_EXHAUSTED answers seen.
	MetricThrottled = "bttl_throttle_resource_exhausted_total"
	// MetricDecreases: times the rate was lowered.
	MetricDecreases = "bttl_throttle_decreases_total"
)

// WriteMetrics writes the controller's rate and counts as Prometheus
// series in the text exposition format, labelled command.
func (c *Controller) WriteMetrics(w io.Writer, command string) error {
	reg := prometheus.NewPedanticRegistry()
	lbl := prometheus.Labels{"command": command}
	r := c.Rate()
	if r == 0 {
		r = math.Inf(1)
	}
	st := c.Stats()
	for _, m := range []struct {
		name, help string
		counter    bool
		v          float64
	}{
		{MetricRate, "The pace of bttl's scan in cells a second (+Inf: unlimited).", false, r},
		{MetricCeiling, "-cells-per-second, the most the pace may reach (0: none).", false, c.ceiling},
		{MetricThrottled, "RESOURCE_EXHAUSTED answers bttl's clients received.", true, float64(st.Throttled)},
		{MetricDecreases, "Times bttl lowered its pace after RESOURCE_EXHAUSTED.", true, float64(st.Decreases)},
	} {
		var col prometheus.Collector
		if m.counter {
			k := prometheus.NewCounter(prometheus.CounterOpts{Name: m.name, Help: m.help, ConstLabels: lbl})
			k.Add(m.v)
			col = k
		} else {
			g := prometheus.NewGauge(prometheus.GaugeOpts{Name: m.name, Help: m.help, ConstLabels: lbl})
			g.Set(m.v)
			col = g
		}
		if err := reg.Register(col); err != nil {
			return fmt.Errorf("bttl: throttle metrics: %w", err)
		}
	}
	fams, err := reg.Gather()
	if err != nil {
		return fmt.Errorf("bttl: throttle metrics: %w", err)
	}
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(w, f); err != nil {
			return err
		}
	}
	return nil
}
