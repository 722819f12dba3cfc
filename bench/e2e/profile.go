package e2e

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// windowProfile is --cpuprofile with --profile-window: a CPU profile of one
// phase's measured window alone, without its preload and warm-up (at 20,000
// keys the warm-up's first loads and claims from the snapshot store were
// half of a whole-phase profile, issue 30).
type windowProfile struct {
	path string // "" : none
	f    *os.File
}

// start begins the profile (at the first measured output); a failure is
// reported on stderr and the phase goes on without it.
func (p *windowProfile) start() {
	if p.path == "" || p.f != nil {
		return
	}
	f, err := os.Create(p.path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
		if err != nil {
			_ = f.Close()
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kpcastream bench: --profile-window: %v\n", err)
		p.path = ""
		return
	}
	p.f = f
}

// stop ends the profile (at the end of the window); only the first call
// after start does.
func (p *windowProfile) stop() {
	if p.f == nil {
		return
	}
	pprof.StopCPUProfile()
	if err := p.f.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "kpcastream bench: --profile-window: %v\n", err)
	}
	p.f, p.path = nil, ""
}
