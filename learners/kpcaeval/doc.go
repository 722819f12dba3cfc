// Package kpcaeval scores a kernel PCA model against exact batch kernel PCA
// of a set of rows, using Gram matrices only (no explicit feature map).
//
// A learners.Model describes k feature-space directions wᵢ = Σⱼ Aⱼᵢ φ(zⱼ)
// over its points Z with A = Coefficients (the offsets only shift the
// projections). The reference is learners.FitBatch of the evaluation rows
// X with the model's kernel and the same k: directions uᵢ = Σⱼ Cⱼᵢ(φ(xⱼ) − m)
// with C = α, orthonormal by construction (αᵢᵀK̃αⱼ = δᵢⱼ). Compare reports
// the principal angles between span{wᵢ} and span{uᵢ}, the relative errors of
// the model's eigenvalues, the reference's eigengap and the feature-space
// reconstruction errors of both subspaces.
//
// The functions are pure and safe for concurrent use. Cost: one batch fit of
// the n rows (O(n³) dense, less with Lanczos) plus O(n·p·(d+k)) for the cross
// Gram; memory O(n² + n·p).
//
// Its one reason to change is how a model is scored against exact batch
// kernel PCA.
package kpcaeval
