// Command similarity scores model exports against exact batch kernel PCA
// of the rows of a CSV file, with learners/kpcaeval (principal angles
// between the model's and the reference's k-dimensional feature-space
// subspaces):
//
//	go run ./bench/cmd/similarity --in rows.csv [--drop label] model.json…
//
// It prints one JSON object per model: {"model":…,"n":…,"k":…,
// "similarity":…,"cosines":[…],"gap":…}. One batch fit of the rows is
// shared by all models (they must have the same kernel and k).
//
// Its one reason to change is how model exports are scored against batch KPCA
// from the command line.
package main
