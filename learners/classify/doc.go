// Package classify is an online multiclass linear classifier for features
// that a kernel PCA learner produces, kept basis-aware: when the learner
// changes its coordinates, the weights are re-expressed by the same
// transform, so a basis change does not cost accuracy.
//
// Its one reason to change is the classifier stage's maths.
//
// # Model
//
// The classifier is regularised least squares, one output per class
// (one-vs-rest with targets 1 for the true class and 0 for the others),
// trained by recursive least squares (RLS): for features z ∈ Rⁿ and the
// augmented vector z̃ = (z, 1) (the bias), it keeps the weights W (C×(n+1))
// and P = (λI + Σₜ βᴺ⁻ᵗ z̃ₜz̃ₜᵀ)⁻¹ exactly (β the forgetting factor, default
// 1). The scores s = W z̃ are the ridge-regression fit of the class
// indicators, so they sum to about 1 and rank the classes; the prediction
// is the class with the largest score. Learn costs O(n² + Cn), Predict
// O(Cn); memory is 8·((n+1)² + (C+1)(n+1) + C) bytes, fixed by n and C.
//
// Kernel view (Zhang et al. 2010): fed the whitened dictionary coordinates
// z = L⁻¹k_D(x) of an IKPCA learner (n = B), the scores are
// sᵢ(x) = Σⱼ αᵢⱼ k(dⱼ, x) + bᵢ with α = L⁻ᵀW: kernel ridge regression on the
// dictionary's span (the KRLS of Engel, Mannor and Meir 2004 on the same
// ALD dictionary), so the linear model on these features is a kernel
// machine.
//
// # Loss
//
// Config.Loss "squared" (the default) is the model above. "hinge" is the
// one-vs-rest squared hinge on the same recursion: the a-priori residual
// eᵣ = tᵣ − sᵣ of class r is dropped (W's row r is not moved) when the
// score is already beyond its target, the true class's above 1 or another
// class's below 0; P takes every observation in as for the squared loss,
// so W and P mean the same under both losses and the state, its
// re-expression on a basis change, its cost and its memory are those of
// the squared loss (a saved state may be restored into a classifier of
// the other loss). The squared loss spends the few weights of a small
// budget on fitting the indicators of points classified with room to
// spare; the hinge leaves those alone: on satellite (B 200, one pass) it
// is 0.1–0.7 points ahead on each of five shuffles (bench/RESULTS.md §17).
// It is an online approximation: a class's residual is dropped by the
// margin at the time the observation arrives, so the result is not the
// batch squared-hinge fit, which a one-pass recursion cannot reach.
//
// # Basis awareness
//
// Classifier implements learners.CoordTracker: a learner's LearnTracked
// tells it of each rotation, dropped coordinate and new coordinate. A
// rotation G is applied to W's columns and to P on both sides (P ← GPGᵀ):
// exact, predictions are unchanged for every x. A dropped coordinate
// projects W on the remaining span (exact for x in that span) and replaces
// P by the inverse of the covariance restricted to the other coordinates
// (the Schur complement: exact for that restriction). A new coordinate
// gets weight 0 (exact for x in the old span) or, for a centroid move, the
// dropped coordinate's weight times the cosine the learner reports; its
// row of P is that of a direction never seen (1/λ on the diagonal): past
// observations had no component along it up to the learner's admission
// tolerance. The carried mass of a centroid move is not carried into P.
//
// Fed any other features (the k published components, say) with Learn and
// Predict only, it is the same classifier without basis awareness.
//
// A Classifier is not safe for concurrent use. It is deterministic: the
// same config and inputs give bit-identical state.
package classify
