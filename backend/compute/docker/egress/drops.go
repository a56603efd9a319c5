package egress

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Per-sandbox drop counts: every drop rule is preceded by a rule adding
// the packet to the dynamic set @drops, keyed by the sender's MAC address
// and the reason's number, each element carrying its own counter. The
// update is a rule of its own: when the set is full (a sender forging MAC
// addresses), only the accounting stops, never the drop. One read of the
// set answers for every sandbox (Drops), so nothing is read per create.
const (
	dropsSet  = "drops"
	dropsSize = 65536
)

// reasonNumbers key the reasons in @drops (stable: they are in the table).
var reasonNumbers = map[string]int{ReasonLinkLocal: 1, ReasonPrivate: 2, ReasonHost: 3, ReasonPolicy: 4, ReasonOffline: 5}

// dropRules renders the two rules dropping what match matches (everything
// when match is ""): the per-sender accounting, then the counted drop.
func dropRules(match, reason string) []string {
	pre := ""
	if match != "" {
		pre = match + " "
	}
	return []string{
		fmt.Sprintf("%supdate @%s { ether saddr . %d }", pre, dropsSet, reasonNumbers[reason]),
		fmt.Sprintf("%scounter name %s drop", pre, counterName(reason)),
	}
}

// Drops reads the packets dropped per sender MAC address (lower case), by
// reason, since the sender's first drop (or its last ForgetDrops).
func (f *Firewall) Drops(ctx context.Context) (map[string]map[string]uint64, error) {
	out, err := f.run(ctx, "", "list", "set", "inet", Table, dropsSet)
	if err != nil {
		return nil, err
	}
	return parseDrops(out), nil
}

var dropElement = regexp.MustCompile(`([0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}) \. (0x[0-9a-fA-F]+|\d+) counter packets (\d+)`)

func parseDrops(out string) map[string]map[string]uint64 {
	byNumber := map[int64]string{}
	for r, n := range reasonNumbers {
		byNumber[int64(n)] = r
	}
	res := map[string]map[string]uint64{}
	for _, m := range dropElement.FindAllStringSubmatch(out, -1) {
		num, err := strconv.ParseInt(m[2], 0, 64)
		reason, ok := byNumber[num]
		if err != nil || !ok {
			continue
		}
		n, _ := strconv.ParseUint(m[3], 10, 64)
		mac := strings.ToLower(m[1])
		if res[mac] == nil {
			res[mac] = map[string]uint64{}
		}
		res[mac][reason] += n
	}
	return res
}

// ForgetDrops removes the counts of these MAC addresses (a deleted
// sandbox's: the engine may give its address to the next one).
func (f *Firewall) ForgetDrops(ctx context.Context, macs ...string) error {
	var b strings.Builder
	for _, mac := range macs {
		mac = strings.ToLower(mac)
		if !macPattern.MatchString(mac) {
			continue
		}
		for _, r := range Reasons {
			// add-then-delete: deleting a missing element fails the transaction.
			fmt.Fprintf(&b, "add element inet %[1]s %[2]s { %[3]s . %[4]d }\ndelete element inet %[1]s %[2]s { %[3]s . %[4]d }\n",
				Table, dropsSet, mac, reasonNumbers[r])
		}
	}
	if b.Len() == 0 {
		return nil
	}
	return f.apply(ctx, b.String())
}
