// Package monitor is the process-monitoring arithmetic of a pipeline: control
// limits for the SPE and Hotelling's T² of a learner's outputs, the alarm
// verdict, gated learning (learn only what is within the limits) and the
// running standardisation of the inputs. It is pure and deterministic like
// the learners: no I/O, no clock, no goroutines; a Monitor is owned by the
// goroutine that owns its key's learner and is not safe for concurrent use.
//
// # Limits
//
// Both limits use Box's (1954) approximation of a quadratic form by a
// scaled chi-square, as Nomikos & MacGregor (1995) and Lee et al. (2004) do
// for the SPE: with m and v the mean and variance of the statistic on normal
// data,
//
//	limit = g·χ²_h(level),  g = v/(2m),  h = 2m²/v
//
// where χ²_h(level) is the level-quantile of a chi-square with h (real)
// degrees of freedom. m and v are running moments of the statistic over the
// observations the learner learned, weighted with the learner's forgetting
// factor f (weight fᵃ for an observation a observations old), so the limits
// follow the model as it follows the process. Why this estimator:
// Jackson–Mudholkar needs the discarded eigenvalues θ₁…θ₃, which a budgeted
// learner does not hold; an empirical 99 % quantile needs several thousand
// normal samples to be stable, while the two moments settle within a few
// hundred. The same approximation is used for T²: when T² has the moments
// of a χ²_k (mean k, variance 2k) it gives exactly g = 1, h = k, the
// textbook large-n limit, and when the learner's eigenvalues are not the
// variances of its scores (forgetting, a budget, an RBF kernel whose scores
// shrink away from the data) it follows the statistic actually observed
// instead of assuming χ²_k.
//
// # Learning
//
// Learn "always" (the default, today's behaviour) learns every observation,
// then scores it. Learn "normal" scores an observation with the current
// model first (a predictive statistic: the model has not seen it) and learns
// it only if neither statistic is above its limit. The first Warmup learned
// observations are learned unconditionally; the limits are estimated from
// the second half of the warm-up on (the first half lets the learner and
// the standardiser settle) and are in force, with alarms, from the end of
// the warm-up. After AcceptAfter consecutive alarmed observations (0 =
// never) the monitor accepts the new regime: it clears its limit moments
// and starts a new warm-up, so the following observations are learned
// again. An alarmed observation is still scored and published.
//
// # Standardisation
//
// With Standardize, every input variable is centred and scaled,
// x'ⱼ = (xⱼ − μⱼ)/σⱼ, by running means and standard deviations of the
// learned observations, weighted with the same forgetting; a variable whose
// standard deviation is 0 is only centred. With Freeze the statistics stop
// moving at the end of the warm-up. The learner sees only x'.
package monitor
