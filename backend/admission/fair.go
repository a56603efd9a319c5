package admission

import "sort"

// Item is one queued create as the dispatcher sees it.
type Item struct {
	ID       string
	Org      string
	Provider string
	Seq      int64 // insertion order: FIFO within an org
	CPU      int
	MemoryMB int
}

// Verdict is what a check says of the head of an org's queue.
type Verdict int

const (
	Fits            Verdict = iota // admit it now
	OrgBlocked                     // the org's quota (or a retry delay) holds it: skip the org this pass
	ProviderBlocked                // its provider is full: nothing more for that provider this pass
)

// Order picks the queued items to admit now, in admission order. Within an
// org items go strictly in Seq order (a blocked head blocks the org: no
// overtaking). Across orgs it is round-robin: the org served least recently
// (lastServed, a pass-independent counter kept by the caller; unknown orgs
// count as never served, ties by the oldest head) goes first, and each org
// takes one item per round. A full provider stops every org's items for it
// for the rest of the pass, so a large create at the head is not starved by
// smaller ones behind it. check is asked once per candidate and must account
// for what it admitted (usage grows as items are admitted).
func Order(items []Item, lastServed map[string]uint64, check func(Item) Verdict) []Item {
	queues := map[string][]Item{}
	for _, it := range items {
		queues[it.Org] = append(queues[it.Org], it)
	}
	orgs := make([]string, 0, len(queues))
	for org, q := range queues {
		sort.Slice(q, func(i, j int) bool { return q[i].Seq < q[j].Seq })
		orgs = append(orgs, org)
	}
	sort.Slice(orgs, func(i, j int) bool {
		a, b := lastServed[orgs[i]], lastServed[orgs[j]]
		if a != b {
			return a < b
		}
		return queues[orgs[i]][0].Seq < queues[orgs[j]][0].Seq
	})
	fullProvider := map[string]bool{}
	var out []Item
	for len(orgs) > 0 {
		next := orgs[:0]
		for _, org := range orgs {
			q := queues[org]
			head := q[0]
			if fullProvider[head.Provider] {
				continue
			}
			switch check(head) {
			case Fits:
				out = append(out, head)
				if len(q) > 1 {
					queues[org] = q[1:]
					next = append(next, org)
				}
			case ProviderBlocked:
				fullProvider[head.Provider] = true
			}
		}
		orgs = next
	}
	return out
}
