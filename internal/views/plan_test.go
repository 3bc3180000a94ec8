package views

import (
	"bytes"
	"strings"
	"testing"

	"github.com/probectl/probectl/compiler/compiled"
)

// A USDT probe's plan shows its sites, its semaphore and its arguments;
// one whose sites differ says the cookie tells them apart.
func TestRenderUSDT(t *testing.T) {
	for _, c := range []struct {
		sites []compiled.USDTSite
		want  []string
	}{
		{[]compiled.USDTSite{{Address: 0x122b, Offset: 0x122b, RefCtrOffset: 0x3020, Args: "-4@-8(%rbp) -4@%eax"}}, []string{
			`      usdt       = work:tick, 1 site at 0x122b, semaphore at file offset 0x3020 (ref_ctr_offset)`,
			`      arguments  = -4@-8(%rbp) -4@%eax`,
		}},
		{[]compiled.USDTSite{{Address: 0x10, Args: "-4@%edi"}, {Address: 0x11, Args: "-8@%rsi"}, {Address: 0x12, Args: "-4@%edi"}}, []string{
			`      usdt       = work:tick, 3 sites at 0x10, 0x11, 0x12`,
			`      arguments  = -4@%edi; -8@%rsi (the sites differ: the cookie says which fired)`,
		}},
		{nil, []string{`      usdt       = work:tick (resolved at apply: the binary is not on this host)`}},
	} {
		var buf bytes.Buffer
		ch := &compiled.Change{Description: compiled.Description{USDT: "work:tick", Sites: c.sites, Functions: []string{"work:tick"}}}
		if c.sites == nil {
			ch.Functions = nil
		}
		renderWhat(rowWriter(&buf), ch)
		if got := strings.TrimRight(buf.String(), "\n"); got != strings.Join(c.want, "\n") {
			t.Errorf("got:\n%s\nwant:\n%s", got, strings.Join(c.want, "\n"))
		}
	}
}
