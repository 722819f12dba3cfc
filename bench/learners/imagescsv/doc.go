// Command imagescsv writes the synthetic image stream of
// learnertest.Images as CSV (pixels p0…p{d−1}, then label), for reference
// classifiers outside Go (bench/learners/svm_reference.py):
//
//	go run ./bench/learners/imagescsv -n 4000 -stream 1 > images.csv
//
// Its one reason to change is the CSV a reference classifier outside Go
// reads.
package main
