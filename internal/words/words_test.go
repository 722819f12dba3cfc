package words

import "testing"

func TestPlural(t *testing.T) {
	for _, c := range []struct {
		n          int
		noun, want string
	}{{1, "row", "1 row"}, {0, "row", "0 rows"}, {2, "pass", "2 passes"}, {3, "box", "3 boxes"}, {2, "batch", "2 batches"}, {1, "pass", "1 pass"}} {
		if got := Plural(c.n, c.noun); got != c.want {
			t.Errorf("Plural(%d, %q) = %q, want %q", c.n, c.noun, got, c.want)
		}
	}
}
