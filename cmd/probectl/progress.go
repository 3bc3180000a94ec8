package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progressAfter is how long a step runs before progress says so.
var progressAfter = time.Second

// progress runs step; when it takes longer than progressAfter, it says on
// w (stderr: never into -json output) what it is doing, and then how long
// it took. A quick step prints nothing; progressAfter 0 says it at once.
func progress(w io.Writer, what string, step func()) {
	var mu sync.Mutex
	said := false
	start := time.Now()
	say := func() {
		mu.Lock()
		defer mu.Unlock()
		said = true
		fmt.Fprintf(w, "%s...\n", what)
	}
	after := progressAfter
	if after <= 0 {
		say()
	}
	t := time.AfterFunc(max(after, 0), func() {
		if after > 0 {
			say()
		}
	})
	step()
	t.Stop()
	mu.Lock()
	defer mu.Unlock()
	if said {
		fmt.Fprintf(w, "%s: done in %.1fs.\n", what, time.Since(start).Seconds())
	}
}
