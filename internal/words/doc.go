// Package words writes counted nouns in messages ("1 row", "2 passes").
// Its one reason to change is how the commands' messages count things.
package words
