package privacy

// numbers gives each distinct key a number, counting from 1 in the order
// first seen, for --anonymize drop (flows and prefixes numbered per run).
//
// Memory is bounded by two generations of at most limit keys each: when
// the current one is full it becomes the old one and the oldest is
// forgotten. A key found in the old generation moves to the current one,
// so a flow that stays active keeps its number however long the run; a
// flow unseen for two generations gets a new number if it comes back.
type numbers[K comparable] struct {
	cur, old map[K]uint64
	limit    int
	last     uint64
}

func newNumbers[K comparable](limit int) *numbers[K] {
	return &numbers[K]{cur: make(map[K]uint64), limit: limit}
}

func (n *numbers[K]) get(k K) uint64 {
	if id, ok := n.cur[k]; ok {
		return id
	}
	id, ok := n.old[k]
	if !ok {
		n.last++
		id = n.last
	}
	if len(n.cur) >= n.limit {
		n.old, n.cur = n.cur, make(map[K]uint64, n.limit)
	}
	n.cur[k] = id
	return id
}
