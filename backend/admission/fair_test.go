package admission

import (
	"fmt"
	"slices"
	"testing"
)

func ids(items []Item) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.ID
	}
	return out
}

// queue builds n items per org, interleaved in arrival order the way a burst
// from several clients lands: org a's all first, then b's, then c's.
func queue(orgs []string, n int) []Item {
	var items []Item
	seq := int64(0)
	for _, org := range orgs {
		for i := range n {
			seq++
			items = append(items, Item{ID: fmt.Sprintf("%s%d", org, i+1), Org: org, Provider: "docker", Seq: seq, CPU: 1})
		}
	}
	return items
}

// slots admits up to n items in total, like a provider with n free places.
func slots(n int) func(Item) Verdict {
	return func(Item) Verdict {
		if n == 0 {
			return ProviderBlocked
		}
		n--
		return Fits
	}
}

func TestOrderRoundRobinAcrossOrgsFIFOWithin(t *testing.T) {
	// a's burst arrived entirely before b's and c's: still, a takes one turn
	// per round, not everything.
	got := ids(Order(queue([]string{"a", "b", "c"}, 4), nil, slots(7)))
	want := []string{"a1", "b1", "c1", "a2", "b2", "c2", "a3"}
	if !slices.Equal(got, want) {
		t.Fatalf("admitted %v, want %v", got, want)
	}
}

func TestOrderLeastRecentlyServedGoesFirst(t *testing.T) {
	// a was served last time (turn 9), b and c long ago: b and c go before a.
	got := ids(Order(queue([]string{"a", "b", "c"}, 2), map[string]uint64{"a": 9, "b": 3, "c": 5}, slots(3)))
	if want := []string{"b1", "c1", "a1"}; !slices.Equal(got, want) {
		t.Fatalf("admitted %v, want %v", got, want)
	}
}

func TestOrderBlockedHeadBlocksItsOrgOnly(t *testing.T) {
	// a's head is held by a's quota: none of a's later items overtake it,
	// and the other orgs are served as usual.
	got := ids(Order(queue([]string{"a", "b"}, 3), nil, func(it Item) Verdict {
		if it.Org == "a" {
			return OrgBlocked
		}
		return Fits
	}))
	if want := []string{"b1", "b2", "b3"}; !slices.Equal(got, want) {
		t.Fatalf("admitted %v, want %v", got, want)
	}
}

func TestOrderFullProviderStopsOnlyThatProvider(t *testing.T) {
	items := queue([]string{"a", "b"}, 2)
	items[1].Provider, items[3].Provider = "e2b", "e2b" // a2 and b2 go to e2b
	// docker has room for one; e2b for all.
	room := 1
	got := ids(Order(items, nil, func(it Item) Verdict {
		if it.Provider == "e2b" {
			return Fits
		}
		if room == 0 {
			return ProviderBlocked
		}
		room--
		return Fits
	}))
	// a1 takes docker's place; b1 finds docker full, so b is blocked behind
	// its head (FIFO); a2 (e2b) proceeds.
	if want := []string{"a1", "a2"}; !slices.Equal(got, want) {
		t.Fatalf("admitted %v, want %v", got, want)
	}
}

func TestOrderKeepsSeqOrderWhateverTheInputOrder(t *testing.T) {
	items := queue([]string{"a"}, 5)
	slices.Reverse(items)
	if got, want := ids(Order(items, nil, slots(5))), []string{"a1", "a2", "a3", "a4", "a5"}; !slices.Equal(got, want) {
		t.Fatalf("admitted %v, want %v", got, want)
	}
}
