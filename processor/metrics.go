package processor

import (
	"math"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kpcastream/kpcastream/internal/buildinfo"
)

// MetricPrefix is the prefix of every metric of the processor: the
// binary's name, as Prometheus' naming conventions ask.
const MetricPrefix = "kpcastream_"

// metrics are the Prometheus collectors of a Processor. Labels are the
// pipeline name and small fixed sets (result, reason, advice, le); never
// keys, so the series are bounded by the configuration.
type metrics struct {
	messages        *prometheus.CounterVec   // pipeline, result
	outputs         *prometheus.CounterVec   // pipeline
	deadLetters     *prometheus.CounterVec   // pipeline, reason
	learnSeconds    *prometheus.HistogramVec // pipeline
	t2              *prometheus.HistogramVec // pipeline
	activeLearners  *prometheus.GaugeVec     // pipeline
	storedPoints    *prometheus.GaugeVec     // pipeline
	budgetPoints    *prometheus.GaugeVec     // pipeline
	reg             prometheus.Registerer    // for the per-pipeline explained-variance mean
	explainedBands  *prometheus.GaugeVec     // pipeline, at_most
	snapBytes       *prometheus.HistogramVec // pipeline
	snapSeconds     *prometheus.HistogramVec // pipeline
	snapFailures    *prometheus.CounterVec   // pipeline, reason
	pending         *prometheus.GaugeVec     // pipeline
	checkpoint      *prometheus.GaugeVec     // pipeline
	publishErrors   *prometheus.CounterVec   // pipeline
	partitionsOwned *prometheus.GaugeVec     // pipeline
	takeovers       *prometheus.CounterVec   // pipeline
	fenced          *prometheus.CounterVec   // pipeline
	budget          *prometheus.GaugeVec     // pipeline, advice
	buildInfo       *prometheus.GaugeVec     // version, revision, goversion
	clsAccuracy     *prometheus.GaugeVec     // pipeline
	clsLabels       *prometheus.CounterVec   // pipeline, class
	clsPredictions  *prometheus.CounterVec   // pipeline, class, result
	alarms          *prometheus.CounterVec   // pipeline, statistic
	memoryBudget    *prometheus.GaugeVec     // pipeline
	memoryUsed      *prometheus.GaugeVec     // pipeline
	evictions       *prometheus.CounterVec   // pipeline
	localKeys       *prometheus.GaugeVec     // pipeline
	localBytes      *prometheus.GaugeVec     // pipeline
	localLoads      *prometheus.CounterVec   // pipeline
	localSpills     *prometheus.CounterVec   // pipeline
}

// alarmStatistics are the statistic label values of kpcastream_alarms_total.
var alarmStatistics = []string{"spe", "t2"}

// Message results (label "result" of kpcastream_messages_total).
const (
	resultOK         = "ok"
	resultWarming    = "warming"
	resultSkipped    = "skipped"
	resultDeadLetter = "dead_letter"
	resultNak        = "nak"
)

// messageResults are every value of the result label, initialised to 0
// for each pipeline so that rate() and alerts see a series from the start.
var messageResults = []string{resultOK, resultWarming, resultSkipped, resultDeadLetter, resultNak}

// deadLetterReasons are the reasons classify gives a dead-lettered
// (terminated) message; kpcastream_dead_letters_total starts at 0 for each.
// TestDeadLetterReasonsComplete checks the list against classify.
var deadLetterReasons = []string{"too_large", "version", "malformed", "dimension", "non_finite", "numerical", "label", "panic"}

// snapshotFailureReasons are the reason label values of
// kpcastream_snapshot_failures_total.
var snapshotFailureReasons = []string{"conflict", "corrupt", "error"}

// budgetAdvices are the advice label values of kpcastream_budget_learners
// (learners.Summary.BudgetAdvice).
var budgetAdvices = []string{"ok", "tight", "too_small"}

// explainedBounds are the upper bounds of kpcastream_explained_variance_learners
// (with 1, as the at_most label); explainedAtMost are their label values.
// The label is not "le": Prometheus reserves it for histograms.
var (
	explainedBounds = []float64{0.5, 0.8, 0.9, 0.95, 0.99}
	explainedAtMost = []string{"0.5", "0.8", "0.9", "0.95", "0.99", "1"}
)

// explainedBand returns the index in explainedAtMost of the smallest bound ≥ v.
func explainedBand(v float64) int8 {
	for i, b := range explainedBounds {
		if v <= b {
			return int8(i)
		}
	}
	return int8(len(explainedBounds))
}

// Histogram buckets: ×2 apart (×4 before), so a quantile estimate is off
// by at most a factor √2.
var (
	learnBuckets    = prometheus.ExponentialBuckets(1e-6, 2, 21) // 1 µs … 1.05 s
	snapSecBuckets  = prometheus.ExponentialBuckets(1e-4, 2, 17) // 0.1 ms … 6.6 s
	snapByteBuckets = prometheus.ExponentialBuckets(1024, 2, 16) // 1 KiB … 32 MiB
	t2Buckets       = prometheus.ExponentialBuckets(0.25, 2, 14) // 0.25 … 2048
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const p = MetricPrefix
	m := &metrics{
		reg: reg,
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: p + "messages_total",
			Help: "Input messages handled, by result (ok, warming, skipped, dead_letter, nak)."}, []string{"pipeline", "result"}),
		outputs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: p + "outputs_total",
			Help: "Projections published."}, []string{"pipeline"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{Name: p + "dead_letters_total",
			Help: "Input messages dead-lettered, by reason."}, []string{"pipeline", "reason"}),
		learnSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: p + "learn_duration_seconds",
			Help:    "Time to learn and score one input message.",
			Buckets: learnBuckets}, []string{"pipeline"}),
		t2: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: p + "output_hotelling_t2",
			Help:    "Hotelling's T² of each published projection (dimensionless; about k on average for data like the learned, large for novel data).",
			Buckets: t2Buckets}, []string{"pipeline"}),
		activeLearners: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: p + "active_learners",
			Help: "Learners loaded in memory."}, []string{"pipeline"}),
		storedPoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: p + "dictionary_points",
			Help: "Stored points (dictionary or window fill) summed over the loaded learners."}, []string{"pipeline"}),
		budgetPoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: p + "learner_budget_points",
			Help: "The budget B of one learner (dictionary size or window length); fill = dictionary_points / (B · active_learners)."}, []string{"pipeline"}),
		explainedBands: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: p + "explained_variance_learners",
			Help: "Loaded learners whose last projection's explained variance ratio is ≤ at_most (cumulative; at_most=\"1\" counts every learner that has projected)."}, []string{"pipeline", "at_most"}),
		snapBytes: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: p + "snapshot_state_bytes",
			Help:    "Size of the state arrays of each saved snapshot: the learner's and the classifier stage's (8 bytes per value).",
			Buckets: snapByteBuckets}, []string{"pipeline"}),
		snapSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: p + "snapshot_duration_seconds",
			Help:    "Time to save one snapshot.",
			Buckets: snapSecBuckets}, []string{"pipeline"}),
		snapFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: p + "snapshot_failures_total",
			Help: "Failed snapshot saves and loads, by reason (conflict, corrupt, error)."}, []string{"pipeline", "reason"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: p + "consumer_pending_messages",
			Help: "Consumer lag: messages in the stream not yet delivered to the consumer."}, []string{"pipeline"}),
		checkpoint: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: p + "checkpoint_sequence",
			Help: "Stream sequence from which a restart replays the input."}, []string{"pipeline"}),
		publishErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: p + "publish_errors_total",
			Help: "Failed output publishes."}, []string{"pipeline"}),
		partitionsOwned: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: p + "partitions_owned",
			Help: "Partitions of the pipeline this instance runs."}, []string{"pipeline"}),
		takeovers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: p + "partition_takeovers_total",
			Help: "Partitions taken over from a member that stopped renewing them."}, []string{"pipeline"}),
		fenced: prometheus.NewCounterVec(prometheus.CounterOpts{Name: p + "partitions_fenced_total",
			Help: "Partitions this instance stopped because their ownership moved to a newer epoch or was not renewed in time."}, []string{"pipeline"}),
		budget: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: p + "budget_learners",
			Help: "Loaded learners by the budget advice of their last message (ok, tight, too_small: the budget B is too small for the stream)."}, []string{"pipeline", "advice"}),
		buildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: p + "build_info",
			Help: "Always 1; the labels say what the binary was built from (as 'kpcastream version')."}, []string{"version", "revision", "goversion"}),
		clsAccuracy: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: p + "classifier_accuracy",
			Help: "Prequential accuracy of the classifier stage over the last classifier.window labelled predictions of the key most recently processed."}, []string{"pipeline"}),
		clsLabels: prometheus.NewCounterVec(prometheus.CounterOpts{Name: p + "classifier_labels_total",
			Help: "Labelled observations learned by the classifier stage, by class."}, []string{"pipeline", "class"}),
		clsPredictions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: p + "classifier_predictions_total",
			Help: "Published predictions of the classifier stage, by predicted class and result (correct, wrong, unlabelled)."}, []string{"pipeline", "class", "result"}),
		alarms: prometheus.NewCounterVec(prometheus.CounterOpts{Name: p + "alarms_total",
			Help: "Published outputs above their control limit (pipelines with monitor:), by statistic (spe, t2); an output above both counts in both."}, []string{"pipeline", "statistic"}),
		memoryBudget: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: p + "memory_budget_bytes",
			Help: "The pipeline's memory_budget: bytes of live learners allowed on this instance."}, []string{"pipeline"}),
		memoryUsed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: p + "memory_used_bytes",
			Help: "Bytes the pipeline's live learners take (active_learners × the fixed size of one key, learner, classifier stage and monitor)."}, []string{"pipeline"}),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: p + "key_evictions_total",
			Help: "Keys unloaded to make room for another (memory_budget, max_keys); their learners are loaded again on their next message."}, []string{"pipeline"}),
		localKeys: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: p + "local_keys",
			Help: "Live keys whose learner is in the local tier on disk (local_dir) rather than in memory."}, []string{"pipeline"}),
		localBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: p + "local_bytes",
			Help: "Size of the local tier's files on disk."}, []string{"pipeline"}),
		localLoads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: p + "local_loads_total",
			Help: "Learners read back from the local tier into memory."}, []string{"pipeline"}),
		localSpills: prometheus.NewCounterVec(prometheus.CounterOpts{Name: p + "local_spills_total",
			Help: "Learners moved from memory to the local tier (no snapshot save: their saves follow the snapshot policy)."}, []string{"pipeline"}),
	}
	for _, c := range []prometheus.Collector{m.messages, m.outputs, m.deadLetters, m.learnSeconds, m.t2, m.activeLearners,
		m.storedPoints, m.budgetPoints, m.explainedBands, m.snapBytes, m.snapSeconds, m.snapFailures,
		m.pending, m.checkpoint, m.publishErrors, m.partitionsOwned, m.takeovers, m.fenced, m.budget, m.buildInfo,
		m.clsAccuracy, m.clsLabels, m.clsPredictions, m.alarms, m.memoryBudget, m.memoryUsed, m.evictions, m.localKeys, m.localBytes, m.localLoads, m.localSpills} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	bi := buildinfo.Read()
	m.buildInfo.WithLabelValues(bi.Version, bi.Revision, bi.GoVersion).Set(1)
	return m, nil
}

// pipeMetrics are the children of the per-message collectors for one
// pipeline, looked up once: a WithLabelValues lookup hashes its labels
// under a lock, which the worker would otherwise pay several times per
// message.
type pipeMetrics struct {
	ok, warming, skipped prometheus.Counter // kpcastream_messages_total by result
	outputs              prometheus.Counter
	learnSeconds         prometheus.Observer
	t2                   prometheus.Observer
	storedPoints         prometheus.Gauge
	explained            *explainedStats
	explainedBands       []prometheus.Gauge // by explainedAtMost
	activeLearners       prometheus.Gauge
	pending              prometheus.Gauge
	alarmSPE, alarmT2    prometheus.Counter // kpcastream_alarms_total by statistic
	memoryBudget         prometheus.Gauge
	memoryUsed           prometheus.Gauge
	evictions            prometheus.Counter
	localKeys            prometheus.Gauge
	localBytes           prometheus.Gauge
	localLoads           prometheus.Counter
	localSpills          prometheus.Counter
}

// forPipeline looks up the pipeline's children and creates every series
// of the pipeline with a known label set at 0 (or its value), so that a
// failure counter has a series before its first failure.
func (m *metrics) forPipeline(name string, budget int) (pipeMetrics, error) {
	for _, r := range messageResults {
		m.messages.WithLabelValues(name, r)
	}
	for _, r := range deadLetterReasons {
		m.deadLetters.WithLabelValues(name, r)
	}
	for _, r := range snapshotFailureReasons {
		m.snapFailures.WithLabelValues(name, r)
	}
	for _, a := range budgetAdvices {
		m.budget.WithLabelValues(name, a)
	}
	m.budgetPoints.WithLabelValues(name).Set(float64(budget))
	m.snapBytes.WithLabelValues(name)
	m.snapSeconds.WithLabelValues(name)
	m.checkpoint.WithLabelValues(name)
	m.publishErrors.WithLabelValues(name)
	m.partitionsOwned.WithLabelValues(name)
	m.takeovers.WithLabelValues(name)
	m.fenced.WithLabelValues(name)
	pm := pipeMetrics{
		ok:             m.messages.WithLabelValues(name, resultOK),
		warming:        m.messages.WithLabelValues(name, resultWarming),
		skipped:        m.messages.WithLabelValues(name, resultSkipped),
		outputs:        m.outputs.WithLabelValues(name),
		learnSeconds:   m.learnSeconds.WithLabelValues(name),
		t2:             m.t2.WithLabelValues(name),
		storedPoints:   m.storedPoints.WithLabelValues(name),
		explained:      &explainedStats{},
		activeLearners: m.activeLearners.WithLabelValues(name),
		pending:        m.pending.WithLabelValues(name),
		alarmSPE:       m.alarms.WithLabelValues(name, alarmStatistics[0]),
		alarmT2:        m.alarms.WithLabelValues(name, alarmStatistics[1]),
		memoryBudget:   m.memoryBudget.WithLabelValues(name),
		memoryUsed:     m.memoryUsed.WithLabelValues(name),
		evictions:      m.evictions.WithLabelValues(name),
		localKeys:      m.localKeys.WithLabelValues(name),
		localBytes:     m.localBytes.WithLabelValues(name),
		localLoads:     m.localLoads.WithLabelValues(name),
		localSpills:    m.localSpills.WithLabelValues(name),
	}
	for _, a := range explainedAtMost {
		pm.explainedBands = append(pm.explainedBands, m.explainedBands.WithLabelValues(name, a))
	}
	ev := pm.explained
	err := m.reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricPrefix + "explained_variance_ratio_mean",
		Help: "Mean over the loaded learners of the explained variance ratio of each one's last projection (0 when none has projected; " +
			"weight by explained_variance_learners{at_most=\"1\"} to average instances).",
		ConstLabels: prometheus.Labels{"pipeline": name}}, ev.mean))
	return pm, err
}

// explainedStats is the sum and count over a pipeline's loaded learners
// of their last explained variance ratio, updated by the workers and read
// by a scrape.
type explainedStats struct {
	sum   atomic.Uint64 // float64 bits
	count atomic.Int64
}

func (s *explainedStats) add(d float64) {
	for {
		old := s.sum.Load()
		if s.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

func (s *explainedStats) mean() float64 {
	n := s.count.Load()
	if n <= 0 {
		return 0
	}
	return math.Float64frombits(s.sum.Load()) / float64(n)
}

// result returns the kpcastream_messages_total child of result.
func (pm *pipeMetrics) result(m *metrics, name, result string) prometheus.Counter {
	switch result {
	case resultOK:
		return pm.ok
	case resultWarming:
		return pm.warming
	case resultSkipped:
		return pm.skipped
	}
	return m.messages.WithLabelValues(name, result)
}

// setExplained moves a learner's contribution to the explained-variance
// series from (band from, value old) to (band to, value v); band −1 means
// the learner is not counted (no projection yet, or unloaded). The sum
// costs one atomic add per message; the cumulative counts change only when
// the band does.
func (pm *pipeMetrics) setExplained(from int8, old float64, to int8, v float64) {
	if d := v - old; d != 0 {
		pm.explained.add(d)
	}
	if from == to {
		return
	}
	if from < 0 {
		pm.explained.count.Add(1)
	}
	if to < 0 {
		pm.explained.count.Add(-1)
	}
	if from >= 0 {
		for i := int(from); i < len(pm.explainedBands); i++ {
			pm.explainedBands[i].Dec()
		}
	}
	if to >= 0 {
		for i := int(to); i < len(pm.explainedBands); i++ {
			pm.explainedBands[i].Inc()
		}
	}
}
