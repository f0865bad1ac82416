package kube

import (
	"math"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/aidlc/dlc/backend/kube/api/v1alpha1"
)

// present fills in what the store derives on an object it writes, from
// the object's own fields, for kubectl and for nothing else: a resource
// group's reserved sum and its summary in human units, a finished run's
// duration, the on-demand label of a compute cluster. The same fields give
// the same result, so an update that changes nothing else changes none of
// it. Readers drop the derived status fields (kindInfo.derived): the
// domain never sees them.
func present(obj client.Object) {
	switch o := obj.(type) {
	case *v1alpha1.ComputeCluster:
		l := o.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[v1alpha1.LabelOnDemand] = strconv.FormatBool(o.Spec.Temporary)
		o.SetLabels(l)
	case *v1alpha1.ResourceGroup:
		r := o.Status.Reserved
		capacity := o.Spec.Capacity
		o.Status.Summary = v1alpha1.ResourceGroupSummary{
			CPU:     cores(r.MilliCPU) + "/" + cores(capacity.MilliCPU),
			Memory:  bytesOf(r.Memory, capacity.Memory),
			GPU:     strconv.FormatInt(r.GPU, 10) + "/" + strconv.FormatInt(capacity.GPU, 10),
			Pending: int32(min(len(o.Status.Pending), math.MaxInt32)),
		}
	case *v1alpha1.Run:
		o.Status.Summary = v1alpha1.RunSummary{Duration: ranFor(o.Status.StartedAt, o.Status.FinishedAt)}
	}
}

// cores writes milli-CPUs as cores, exactly: 64000 is "64", 12500 "12.5",
// 250 "0.25".
func cores(milli int64) string {
	sign := ""
	if milli < 0 {
		if milli == math.MinInt64 {
			milli++ // its negation overflows; a thousandth off is no matter here
		}
		sign, milli = "-", -milli
	}
	whole := strconv.FormatInt(milli/1000, 10)
	frac := milli % 1000
	if frac == 0 {
		return sign + whole
	}
	return sign + whole + "." + strings.TrimRight(strconv.FormatInt(1000+frac, 10)[1:], "0")
}

// binaryUnits are the suffixes of bytesOf, each 1024 times the one before.
var binaryUnits = []string{"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}

// bytesOf writes two amounts of bytes as "a/b" in one binary unit, the
// largest that the larger of them holds at least once, to one decimal:
// "48Gi/256Gi", "0.5Gi/8Gi", "512Mi/768Mi".
func bytesOf(a, b int64) string {
	top := float64(max(a, b, 0))
	unit := 0
	for unit < len(binaryUnits)-1 && top >= math.Pow(1024, float64(unit+1)) {
		unit++
	}
	div := math.Pow(1024, float64(unit))
	f := func(n int64) string {
		s := strconv.FormatFloat(float64(n)/div, 'f', 1, 64)
		return strings.TrimSuffix(s, ".0") + binaryUnits[unit]
	}
	return f(a) + "/" + f(b)
}

// ranFor is how long a run ran, as kubectl writes an age, from its
// stored start and finish (RFC 3339): "" unless both are set; a finish
// before the start (the clocks of two replicas) is "0s".
func ranFor(started, finished string) string {
	if started == "" || finished == "" {
		return ""
	}
	s, err1 := time.Parse(time.RFC3339Nano, started)
	f, err2 := time.Parse(time.RFC3339Nano, finished)
	if err1 != nil || err2 != nil {
		return ""
	}
	return duration.HumanDuration(max(f.Sub(s), 0))
}
