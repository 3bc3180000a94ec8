package metrics

import (
	"math"
	"testing"

	"github.com/probectl/probectl/compiler"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// A sum that may fall (Signed) is a gauge named without _total, with its
// negative value; one that cannot is a counter of what the kernel stores,
// unsigned (issue 18, defect 9: every sum was a counter).
func TestSumType(t *testing.T) {
	for _, c := range []struct {
		signed bool
		value  int64
		name   string
		typ    dto.MetricType
		want   float64
	}{
		{true, -10, "probectl_sum_user_p____5a88b254_by_le_a74269af", dto.MetricType_GAUGE, -10},
		{false, 10, "probectl_sum_user_p____5a88b254_by_le_a74269af_total", dto.MetricType_COUNTER, 10},
		{false, -1, "probectl_sum_user_p____5a88b254_by_le_a74269af_total", dto.MetricType_COUNTER, math.MaxUint64}, // 2^64-1 of u64s
	} {
		p, agg, ar := aggregation(compiler.AggSum, 1)
		agg.Signed = c.signed
		*ar.Entries[0].Value = c.value
		fam := newNamer(nil).family(p, agg)
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(collectorFunc(func(ch chan<- prometheus.Metric) { emitAggregation(ch, fam, agg, ar, 100, 0) }))
		mfs, err := reg.Gather()
		if err != nil || len(mfs) != 1 || len(mfs[0].GetMetric()) != 1 {
			t.Fatalf("signed %v: %v %v", c.signed, mfs, err)
		}
		mf := mfs[0]
		got := mf.GetMetric()[0].GetGauge().GetValue()
		if mf.GetType() == dto.MetricType_COUNTER {
			got = mf.GetMetric()[0].GetCounter().GetValue()
		}
		if mf.GetName() != c.name || mf.GetType() != c.typ || got != c.want {
			t.Errorf("signed %v, value %d: %s %s %v; want %s %s %v", c.signed, c.value, mf.GetName(), mf.GetType(), got, c.name, c.typ, c.want)
		}
	}
}
