package seatlease

import "time"

// maxIdleSeconds: the most idle_seconds a heartbeat may carry (ten years; the API's bound).
const maxIdleSeconds = 315360000

// activity is what the product said about its use (Touch, BeginBusy/EndBusy), sent with
// each heartbeat for the license's idle rule. Guarded by Lease.mu.
type activity struct {
	touched    bool      // the product opted in: a product that never touches is never idle
	lastTouch  time.Time // the last user activity
	busy       int       // busy scopes open (nested scopes count)
	busySince  time.Time // the last BeginBusy
	lostIdleAt time.Time // the seat was reclaimed for idleness then
}

// Touch says the product saw user activity now (a keystroke, a command). From the first
// Touch on, every heartbeat carries idle_seconds, the whole seconds since the last one, so
// a license with an idle rule can warn and then reclaim a seat nobody uses; a product that
// never calls Touch is never idle. After a warning (OnIdleWarning) the next heartbeat goes
// at once, so the activity cancels it before the reclaim; after a seat lost for idleness,
// the seat is asked for again. Cheap and non-blocking: call it on every input.
func (l *Lease) Touch() {
	l.mu.Lock()
	l.activity.touched, l.activity.lastTouch = true, time.Now()
	urgent := l.urgentLocked()
	l.mu.Unlock()
	if urgent {
		l.nudge()
	}
}

// BeginBusy opens a busy scope: while one is open (they nest: a counter), heartbeats carry
// busy: true, and the seat is never warned nor reclaimed for idleness (a render, a solve
// left running overnight). Each BeginBusy needs its EndBusy; see Busy.
func (l *Lease) BeginBusy() {
	l.mu.Lock()
	l.activity.busy++
	l.activity.busySince = time.Now()
	urgent := l.urgentLocked()
	l.mu.Unlock()
	if urgent {
		l.nudge()
	}
}

// EndBusy closes the scope BeginBusy opened (an EndBusy without one does nothing).
func (l *Lease) EndBusy() {
	l.mu.Lock()
	if l.activity.busy > 0 {
		l.activity.busy--
	}
	l.mu.Unlock()
}

// Busy runs work inside a busy scope (BeginBusy, then EndBusy however work returns).
func (l *Lease) Busy(work func()) {
	l.BeginBusy()
	defer l.EndBusy()
	work()
}

// urgentLocked: a warning to cancel, or a seat lost for idleness to ask for again: the
// heartbeat goroutine must act now, not at its next beat.
func (l *Lease) urgentLocked() bool {
	return !l.state.IdleReclaimAt.IsZero() || (l.state.Lost && l.state.LostReason == "idle")
}

// nudge wakes the heartbeat goroutine without waiting for it (a wake already pending is
// enough).
func (l *Lease) nudge() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// report adds the activity to a heartbeat's body.
func (l *Lease) report(body map[string]any, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.activity.touched {
		idle := int64(now.Sub(l.activity.lastTouch) / time.Second)
		if idle < 0 {
			idle = 0
		}
		if idle > maxIdleSeconds {
			idle = maxIdleSeconds
		}
		body["idle_seconds"] = idle
	}
	if l.activity.busy > 0 {
		body["busy"] = true
	}
}

// activeSince: the seat is warned but the product was active (or busy) after the heartbeat
// that got the warning left: the next one must go at once to cancel it.
func (l *Lease) activeSince(sentAt time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.activity
	return !l.state.IdleReclaimAt.IsZero() && (a.lastTouch.After(sentAt) || a.busySince.After(sentAt))
}

// idleUntilActive: the seat was reclaimed for idleness and nobody has used the product
// since: asking for it again would only take a seat back from whoever needed it, to be
// reclaimed once more. Touch or BeginBusy wakes the goroutine to ask.
func (l *Lease) idleUntilActive() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	a := l.activity
	return l.state.Lost && l.state.LostReason == "idle" && a.busy == 0 && !a.lastTouch.After(a.lostIdleAt)
}

// warn tells OnIdleWarning of a new warning.
func (l *Lease) warn(reclaimAt time.Time) {
	l.client.logf("seatlease: seat on %s idle: reclaimed at %s unless in use", l.LicenseID, reclaimAt.Format(time.RFC3339))
	if l.options.OnIdleWarning != nil {
		l.callback(func() { l.options.OnIdleWarning(l, reclaimAt) })
	}
}
