package words

import (
	"fmt"
	"strings"
)

// Plural is "1 row", "2 rows", "0 passes": n and the noun, in the plural
// unless n is 1 (regular English nouns: -es after s, x, ch and sh).
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	for _, suf := range []string{"s", "x", "ch", "sh"} {
		if strings.HasSuffix(noun, suf) {
			return fmt.Sprintf("%d %ses", n, noun)
		}
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
