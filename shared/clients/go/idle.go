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
	lostIdleAt time.Time // the seat was reclaimed for idleness then
	// What the last heartbeat said (the warned one, when warned), and whether a heartbeat
	// was already woken since its answer: once per answer, so that a product touching on
	// every key press sends one heartbeat, not one a key.
	sentTouched bool
	sentTouch   time.Time
	sentBusy    bool
	woken       bool
}

// Touch says the product saw user activity now (a keystroke, a command). From the first
// Touch on, every heartbeat carries idle_seconds, the whole seconds since the last one, so
// a license with an idle rule can warn and then reclaim a seat nobody uses; a product that
// never calls Touch is never idle. After a warning (OnIdleWarning) the next heartbeat goes
// at once, so the activity cancels it before the reclaim; after a seat lost for idleness,
// the seat is asked for again. Cheap and non-blocking: call it on every input.
func (l *Lease) Touch() { l.TouchAgo(0) }

// TouchAgo is Touch for activity seen ago before now (the latest call wins), so that a
// product may pass the system's own idle time (the time since the last input event).
func (l *Lease) TouchAgo(ago time.Duration) {
	if ago < 0 {
		ago = 0
	}
	l.mu.Lock()
	l.activity.touched, l.activity.lastTouch = true, time.Now().Add(-ago)
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

// urgentLocked: the heartbeat goroutine must act now, not at its next beat: activity came
// back to a seat lost for idleness (asked for again), or a warning can be cancelled by
// what the warned heartbeat did not say (a touch a whole second newer, or busy). Once per
// answer (or loss): it marks the wake as sent.
func (l *Lease) urgentLocked() bool {
	a := &l.activity
	if a.woken {
		return false
	}
	switch {
	case l.state.Lost && l.state.LostReason == "idle":
		if a.busy == 0 && !a.lastTouch.After(a.lostIdleAt) {
			return false
		}
	case !l.state.IdleReclaimAt.IsZero():
		newer := a.touched && (!a.sentTouched || a.lastTouch.Sub(a.sentTouch) >= time.Second)
		if !newer && (a.busy == 0 || a.sentBusy) {
			return false
		}
	default:
		return false
	}
	a.woken = true
	return true
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
	a := &l.activity
	a.sentTouched, a.sentTouch, a.sentBusy = a.touched, a.lastTouch, a.busy > 0
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

// urgent: urgentLocked under the lock (after an answer: activity that came while the
// warned heartbeat was on its way sends the next one at once).
func (l *Lease) urgent() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.urgentLocked()
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
