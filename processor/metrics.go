package processor

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the Prometheus collectors of a Processor. Labels are the
// pipeline name and small fixed sets (result, reason); never keys.
type metrics struct {
	messages        *prometheus.CounterVec   // pipeline, result
	outputs         *prometheus.CounterVec   // pipeline
	deadLetters     *prometheus.CounterVec   // pipeline, reason
	learnSeconds    *prometheus.HistogramVec // pipeline
	activeLearners  *prometheus.GaugeVec     // pipeline
	storedPoints    *prometheus.GaugeVec     // pipeline
	explained       *prometheus.GaugeVec     // pipeline
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
	clsAccuracy     *prometheus.GaugeVec     // pipeline
	clsLabels       *prometheus.CounterVec   // pipeline, class
	clsPredictions  *prometheus.CounterVec   // pipeline, class, result
}

// Message results (label "result" of kpca_messages_total).
const (
	resultOK         = "ok"
	resultWarming    = "warming"
	resultSkipped    = "skipped"
	resultDeadLetter = "dead_letter"
	resultNak        = "nak"
)

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kpca_messages_total",
			Help: "Input messages handled, by result (ok, warming, skipped, dead_letter, nak)."}, []string{"pipeline", "result"}),
		outputs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kpca_outputs_total",
			Help: "Projections published."}, []string{"pipeline"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kpca_dead_letters_total",
			Help: "Input messages dead-lettered, by reason."}, []string{"pipeline", "reason"}),
		learnSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kpca_learn_duration_seconds",
			Help:    "Time to learn and score one input message.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 12)}, []string{"pipeline"}),
		activeLearners: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kpca_active_learners",
			Help: "Learners loaded in memory."}, []string{"pipeline"}),
		storedPoints: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kpca_dictionary_points",
			Help: "Stored points (dictionary or window fill) summed over the loaded learners."}, []string{"pipeline"}),
		explained: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kpca_explained_variance_ratio",
			Help: "Explained variance ratio of the most recent projection."}, []string{"pipeline"}),
		snapBytes: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kpca_snapshot_state_bytes",
			Help:    "Size of the learner state arrays of each saved snapshot (8 bytes per value).",
			Buckets: prometheus.ExponentialBuckets(1024, 4, 10)}, []string{"pipeline"}),
		snapSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kpca_snapshot_duration_seconds",
			Help:    "Time to save one snapshot.",
			Buckets: prometheus.ExponentialBuckets(1e-4, 4, 10)}, []string{"pipeline"}),
		snapFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kpca_snapshot_failures_total",
			Help: "Failed snapshot saves and loads, by reason (conflict, corrupt, error)."}, []string{"pipeline", "reason"}),
		pending: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kpca_consumer_pending_messages",
			Help: "Consumer lag: messages in the stream not yet delivered to the consumer."}, []string{"pipeline"}),
		checkpoint: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kpca_checkpoint_sequence",
			Help: "Stream sequence from which a restart replays the input."}, []string{"pipeline"}),
		publishErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kpca_publish_errors_total",
			Help: "Failed output publishes."}, []string{"pipeline"}),
		partitionsOwned: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kpca_partitions_owned",
			Help: "Partitions of the pipeline this instance runs."}, []string{"pipeline"}),
		takeovers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kpca_partition_takeovers_total",
			Help: "Partitions taken over from a member that stopped renewing them."}, []string{"pipeline"}),
		fenced: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kpca_partitions_fenced_total",
			Help: "Partitions this instance stopped because their ownership moved to a newer epoch or was not renewed in time."}, []string{"pipeline"}),
		budget: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kpca_budget_learners",
			Help: "Loaded learners by the budget advice of their last message (ok, tight, too_small: the budget B is too small for the stream)."}, []string{"pipeline", "advice"}),
		clsAccuracy: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kpca_classifier_accuracy",
			Help: "Prequential accuracy of the classifier stage over the last classifier.window labelled predictions of the key most recently processed."}, []string{"pipeline"}),
		clsLabels: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kpca_classifier_labels_total",
			Help: "Labelled observations learned by the classifier stage, by class."}, []string{"pipeline", "class"}),
		clsPredictions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kpca_classifier_predictions_total",
			Help: "Published predictions of the classifier stage, by predicted class and result (correct, wrong, unlabelled)."}, []string{"pipeline", "class", "result"}),
	}
	for _, c := range []prometheus.Collector{m.messages, m.outputs, m.deadLetters, m.learnSeconds, m.activeLearners,
		m.storedPoints, m.explained, m.snapBytes, m.snapSeconds, m.snapFailures, m.pending, m.checkpoint, m.publishErrors,
		m.partitionsOwned, m.takeovers, m.fenced, m.budget, m.clsAccuracy, m.clsLabels, m.clsPredictions} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// pipeMetrics are the children of the per-message collectors for one
// pipeline, looked up once: a WithLabelValues lookup hashes its labels
// under a lock, which the worker would otherwise pay several times per
// message.
type pipeMetrics struct {
	ok, warming, skipped prometheus.Counter // kpca_messages_total by result
	outputs              prometheus.Counter
	learnSeconds         prometheus.Observer
	storedPoints         prometheus.Gauge
	explained            prometheus.Gauge
	activeLearners       prometheus.Gauge
	pending              prometheus.Gauge
}

func (m *metrics) forPipeline(name string) pipeMetrics {
	return pipeMetrics{
		ok:             m.messages.WithLabelValues(name, resultOK),
		warming:        m.messages.WithLabelValues(name, resultWarming),
		skipped:        m.messages.WithLabelValues(name, resultSkipped),
		outputs:        m.outputs.WithLabelValues(name),
		learnSeconds:   m.learnSeconds.WithLabelValues(name),
		storedPoints:   m.storedPoints.WithLabelValues(name),
		explained:      m.explained.WithLabelValues(name),
		activeLearners: m.activeLearners.WithLabelValues(name),
		pending:        m.pending.WithLabelValues(name),
	}
}

// result returns the kpca_messages_total child of result.
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
