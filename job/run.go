package job

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/event"
	"github.com/aidlc/dlc/quota"
)

// Record is a saved job configuration (J12): its config, the revision
// that edits bump (J15), and its bookkeeping.
type Record struct {
	ID        string    `json:"id"`
	Config    Config    `json:"config"`
	Revision  int       `json:"revision"` // the config's version; runs keep the one they started from
	Version   string    `json:"-"`        // the store's version; a stale write is a conflict
	Creator   string    `json:"creator"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// Events is the config's operation log, newest last.
	Events []event.Event `json:"events,omitempty"`
	// Deleting marks a config whose delete is in progress (J17).
	Deleting Deletion `json:"deleting,omitzero"`
	// ScheduleStatus is where the config's schedule stands (L1).
	ScheduleStatus ScheduleStatus `json:"scheduleStatus,omitzero"`
}

// ScheduleStatus is where a job config's schedule stands (L1).
type ScheduleStatus struct {
	// Suspended stops the schedule's ticks until it is resumed; the ticks
	// meanwhile are not run.
	Suspended bool `json:"suspended,omitempty"`
	// LastTick is the last tick handled (its run started, or skipped):
	// the ticks after it are due. A schedule set by a create or an edit,
	// or resumed, counts its ticks from then.
	LastTick time.Time `json:"lastTick,omitzero"`
	// LastRun is the run the last started tick made.
	LastRun string `json:"lastRun,omitempty"`
	// NextTick is when the schedule fires next, as of the last tick
	// handled.
	NextTick time.Time `json:"nextTick,omitzero"`
	// Missed counts the ticks skipped, in all: missed by more than the
	// starting deadline, missed while a later tick was due, or forbidden
	// by the concurrency policy; the config's events say which and when
	// (tick-missed, tick-skipped: ticks skipped one after another for the
	// same reason are one entry, its Count how many, its First and Time
	// when the first and the latest were skipped).
	Missed int `json:"missed,omitempty"`
}

// DeepCopy returns a copy of r that shares nothing with it.
func (r *Record) DeepCopy() *Record {
	out := *r
	out.Config = *r.Config.DeepCopy()
	out.Events = slices.Clone(r.Events)
	return &out
}

// The bounds of a run's kept log tail (Run.LogTail): a run is stored,
// and cached by every client, with it.
const (
	MaxLogTailLines = 200
	MaxLogTailBytes = 16 << 10
)

// MaxArchivedLogBytes bounds the whole log of a run written to COS when it
// ends: of a longer one, the last lines within it are written, after a
// line saying how many earlier ones were not (LogArchive.Dropped).
const MaxArchivedLogBytes = 64 << 20

// LogArchive is what was written of a run's whole log to COS: Lines lines
// of it, the last ones, after Dropped earlier ones that were over
// MaxArchivedLogBytes, and the digest of the text. The zero value is none
// written.
type LogArchive struct {
	Lines   int `json:"lines,omitempty"`
	Dropped int `json:"dropped,omitempty"`
	// SHA256 is the hex SHA-256 of the text written: a read of an object
	// that does not hold it (someone else wrote it since) is not taken
	// for the run's log.
	SHA256 string `json:"sha256,omitempty"`
}

// IsZero reports whether no log was written.
func (a LogArchive) IsZero() bool { return a.Lines == 0 }

// KeepLogs keeps the tail of lines, what the run logged, on r (LogTail,
// LogsDropped, LogsKept), within the bounds of LogTailOf.
func (r *Run) KeepLogs(lines []string) {
	r.LogTail, r.LogsDropped = LogTailOf(lines)
	r.LogsKept = true
}

// LogTailOf returns the end of lines within the bounds of Run.LogTail
// (a line longer than the byte bound keeps its end), and how many lines
// before it are left out. Control characters (but tab) are stripped and
// bytes that are not UTF-8 read as U+FFFD, presigned URLs' signatures are
// redacted (RedactSecrets); the byte bound counts what the
// lines take once stored as JSON (a '<' is "\u003c", six bytes), so a
// kept tail of any bytes stores in at most MaxLogTailBytes.
func LogTailOf(lines []string) (tail []string, dropped int) {
	size := 0
	start := len(lines)
	var kept []string
	for start > 0 && len(lines)-start < MaxLogTailLines {
		line := CleanLogLine(lines[start-1])
		l := storedLen(line) + 3 // its quotes and a comma
		if size+l > MaxLogTailBytes {
			if start == len(lines) { // the last line alone is too long: its end
				return []string{storedTail(line, MaxLogTailBytes-3)}, len(lines) - 1
			}
			break
		}
		size += l
		kept = append(kept, line)
		start--
	}
	slices.Reverse(kept)
	return kept, start
}

// secretParams are the query parameters of a presigned URL that grant
// what it names (COS's signature and temporary session token, S3's
// signature and security token): the platform made them, and a driver
// that prints its runtime env would have them kept and shown to whoever
// reads the run.
var secretParams = regexp.MustCompile(`(?i)((?:^|[?&;\s"'])(?:q-signature|x-cos-security-token|x-amz-signature|x-amz-security-token|x-amz-credential|sign)=)[^&\s"']+`)

// RedactSecrets returns s with the values of presigned URLs' signature
// and token parameters replaced by "REDACTED".
func RedactSecrets(s string) string {
	if !strings.Contains(s, "=") {
		return s
	}
	return secretParams.ReplaceAllString(s, "${1}REDACTED")
}

// CleanLogLine returns a log line as the platform keeps it (in the tail,
// and in the whole log written to COS): valid UTF-8 (U+FFFD for what is
// not), without control characters but tab (terminal escapes, NUL, C1
// controls), which a reader's terminal would act on, and without the
// secrets of presigned URLs (RedactSecrets).
func CleanLogLine(s string) string {
	s = RedactSecrets(s)
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || (unicode.IsControl(r) && r != '\t') {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if !unicode.IsControl(r) || r == '\t' {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// storedLen is how many bytes encoding/json writes for a clean line's
// runes (its quotes not counted): six for <, >, &, U+2028 and U+2029, two
// for a quote, a backslash and a tab.
func storedLen(s string) int {
	n := 0
	for _, r := range s {
		n += runeStoredLen(r)
	}
	return n
}

func runeStoredLen(r rune) int {
	switch r {
	case '<', '>', '&', '\u2028', '\u2029':
		return 6
	case '"', '\\', '\t':
		return 2
	}
	return utf8.RuneLen(r)
}

// storedTail is the end of a clean line that stores in at most max bytes.
func storedTail(s string, max int) string {
	n, i := 0, len(s)
	for i > 0 {
		r, w := utf8.DecodeLastRuneInString(s[:i])
		if n+runeStoredLen(r) > max {
			break
		}
		n += runeStoredLen(r)
		i -= w
	}
	return s[i:]
}

// ListEntry is one row of the job list (J13).
type ListEntry struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	Mode      Mode              `json:"mode"`
	Resource  string            `json:"resource"` // the resource group, cluster id or group id
	Package   string            `json:"package"`
	Running   int               `json:"running"` // runs not yet finished
	Priority  int               `json:"priority"`
	Tags      map[string]string `json:"tags,omitempty"`
	Creator   string            `json:"creator"`
	CreatedAt time.Time         `json:"createdAt"`
}

// RunState is a run's state (J14).
type RunState string

// The run states. Queued, Waiting, Provisioning and Running are live;
// Succeeded, Failed and Stopped are terminal.
const (
	Queued       RunState = "queued"
	Waiting      RunState = "waiting"
	Provisioning RunState = "provisioning"
	Running      RunState = "running"
	Succeeded    RunState = "succeeded"
	Failed       RunState = "failed"
	Stopped      RunState = "stopped"
)

// Terminal reports whether the run has ended.
func (s RunState) Terminal() bool { return s == Succeeded || s == Failed || s == Stopped }

// WaitReason says why a run waits (J18).
type WaitReason string

// The waiting reasons.
const (
	// ClusterNotRunning: the run's existing cluster is not running.
	ClusterNotRunning WaitReason = "cluster not running"
	// NoMemberRunning: no member of the run's cluster group is running.
	NoMemberRunning WaitReason = "no member running"
	// AllMembersAbnormal: every member of the run's cluster group is abnormal.
	AllMembersAbnormal WaitReason = "all members abnormal"
	// InsufficientQuota: the resource group lacks allocatable quota for the
	// run's on-demand cluster.
	InsufficientQuota WaitReason = "insufficient unused quota"
)

// MaxPlacementLen bounds a run's Placement, in bytes.
const MaxPlacementLen = 256

// Run is one run (task instance) of a job config (J14). It keeps a
// snapshot of the config revision it started from.
type Run struct {
	ID         string     `json:"id"`
	JobID      string     `json:"jobID"`
	Revision   int        `json:"revision"` // the config revision it runs
	Config     Config     `json:"config"`   // that revision's config
	State      RunState   `json:"state"`
	WaitReason WaitReason `json:"waitReason,omitempty"`
	Message    string     `json:"message,omitempty"` // why it failed or stopped, or detail on waiting
	ClusterID  string     `json:"clusterID,omitempty"`
	// Placement says, for a run in cluster-group mode (J2), which member
	// it went to and why, as the group's policy (G3) decided in the write
	// that placed it: e.g. "least-loaded: 2 active runs, fewest of 4
	// running members". At most MaxPlacementLen bytes; empty for the other
	// modes and while the run is not placed.
	Placement   string    `json:"placement,omitempty"`
	Creator     string    `json:"creator"`
	SubmittedAt time.Time `json:"submittedAt"`
	StartedAt   time.Time `json:"startedAt,omitzero"`
	FinishedAt  time.Time `json:"finishedAt,omitzero"`
	Logs        string    `json:"logs,omitempty"` // where its logs are
	// Priority is the queueing weight of an on-demand run (J3).
	Priority int `json:"priority,omitempty"`
	// Seq orders runs submitted at the same instant: the submitting
	// client's clock in nanoseconds, made strictly increasing per client.
	Seq uint64 `json:"seq,omitempty"`
	// Demand is what admitting an on-demand run reserves: its cluster's
	// head and the workers' minimum.
	Demand quota.Resources `json:"demand,omitzero"`
	// RayDone records that Ray holds nothing more of an ended run (its job
	// stopped or finished), so nothing is left to clean up.
	RayDone bool `json:"rayDone,omitempty"`
	// RaySubmitted records that Ray accepted the run's job. From then on,
	// Ray having no record of it means Ray lost it (a head that restarted),
	// and the run fails saying so: a run is submitted at most once.
	RaySubmitted bool `json:"raySubmitted,omitempty"`
	// RayAcceptedAt is when a client recorded that Ray accepted the job,
	// on its clock: from then on Ray may keep the job pending (its driver
	// not started) only so long (dlc.WithRunStartTimeout). Zero for a run
	// whose acceptance was recorded with its start, or before this field.
	RayAcceptedAt time.Time `json:"rayAcceptedAt,omitzero"`
	// RayUnreachableSince is when a client first failed to read or write
	// the run's job on Ray (the call failed; Ray said nothing of the job),
	// on its clock, while that lasts: the run keeps its state until Ray
	// answers, or fails once Ray stays unreachable past a bound
	// (dlc.WithRayUnreachableTimeout). Zero while Ray answers.
	RayUnreachableSince time.Time `json:"rayUnreachableSince,omitzero"`
	// LogTail is the end of the run's logs, kept when it ended (Ray's
	// record of them goes with its cluster): at most MaxLogTailLines lines
	// and MaxLogTailBytes bytes; LogsKept says they were kept (none were
	// logged, when LogTail is empty), LogsDropped how many lines before
	// the tail were not.
	LogTail     []string `json:"logTail,omitempty"`
	LogsKept    bool     `json:"logsKept,omitempty"`
	LogsDropped int      `json:"logsDropped,omitempty"`
	// LogsArchived says the run's whole log was written to Logs in COS
	// when it ended (dlc.WithLogsLocation in COS, with dlc.WithCOS): Logs
	// and Follow read it from there once Ray no longer has it.
	LogsArchived LogArchive `json:"logsArchived,omitzero"`
	// Attempt numbers the run among the attempts of one run of a config
	// that failed and was retried (L3): 2 for the first retry, and so on;
	// 0 for a first attempt (AttemptNumber says 1).
	Attempt int `json:"attempt,omitempty"`
	// PreviousAttempt is the run this one retries; NextAttempt the run
	// that retries this one.
	PreviousAttempt string `json:"previousAttempt,omitempty"`
	NextAttempt     string `json:"nextAttempt,omitempty"`
	// Final marks a failure that a retry would meet again (its cluster,
	// group or config gone, its deadline passed): it is not retried.
	Final bool `json:"final,omitempty"`
	// Tick is the schedule tick that started the run (L1); zero for a run
	// started by hand.
	Tick    time.Time `json:"tick,omitzero"`
	Version string    `json:"-"` // the store's version; a stale write is a conflict
	// Events is the run's event log, newest last (at most event.MaxEntries).
	Events []event.Event `json:"events,omitempty"`
}

// DeepCopy returns a copy of r that shares nothing with it.
func (r *Run) DeepCopy() *Run {
	out := *r
	out.Config = *r.Config.DeepCopy()
	out.Events = slices.Clone(r.Events)
	out.LogTail = slices.Clone(r.LogTail)
	return &out
}

// AttemptNumber returns the run's attempt number, 1 for a first attempt.
func (r *Run) AttemptNumber() int { return max(r.Attempt, 1) }

// Deadline returns when the run's active deadline passes (L2), and
// whether it has one: ActiveDeadlineSeconds after its submission.
func (r *Run) Deadline() (time.Time, bool) {
	if r.Config.ActiveDeadlineSeconds <= 0 {
		return time.Time{}, false
	}
	return r.SubmittedAt.Add(time.Duration(r.Config.ActiveDeadlineSeconds) * time.Second), true
}

// Retries reports whether the ended run is to be retried (L3): it failed,
// not finally, and its config allows another attempt. The retry is a new
// run (NextAttempt), submitted a backoff after this one finished
// (RetryBackoff(AttemptNumber()) by default).
func (r *Run) Retries() bool {
	return r.State == Failed && !r.Final && r.AttemptNumber() <= r.Config.BackoffLimit
}

// Live reports whether the run has not ended.
func (s RunState) Live() bool { return s != "" && !s.Terminal() }

// RunTrigger is what moves a run from one state to another.
type RunTrigger string

// The run triggers.
const (
	// Queue is a run's birth: it is stored queued.
	Queue RunTrigger = "queue"
	// Wait: it cannot be placed now (J18).
	Wait RunTrigger = "wait"
	// Place: it has a cluster (an existing one, a group member, or an
	// admitted on-demand cluster) and goes to Ray.
	Place RunTrigger = "place"
	// Displace: the cluster it was placed on stopped running before Ray
	// had its job (another replica hibernated it meanwhile): it waits
	// again, to be placed anew.
	Displace RunTrigger = "displace"
	// ObservedRunning: Ray runs its job.
	ObservedRunning RunTrigger = "observed-running"
	// ObservedSucceeded and ObservedFailed: Ray's job ended.
	ObservedSucceeded RunTrigger = "observed-succeeded"
	ObservedFailed    RunTrigger = "observed-failed"
	// Fail: the platform fails it (its target is gone, a step kept failing).
	Fail RunTrigger = "fail"
	// Stop: a user, or a forced cluster operation, stops it.
	Stop RunTrigger = "stop"
)

// Transition is the run state machine (J14, J18): the state a run in
// state from moves to on t. Stopping an ended run is a *errs.StateError;
// a trigger that does not apply returns from and ok false.
func Transition(id string, from RunState, t RunTrigger) (to RunState, ok bool, err error) {
	switch t {
	case Queue:
		// Its birth: only of what is not yet stored.
		if from == "" {
			return Queued, true, nil
		}
	case Wait:
		if from == Queued || from == Waiting {
			return Waiting, true, nil
		}
	case Place:
		if from == Queued || from == Waiting {
			return Provisioning, true, nil
		}
	case Displace:
		if from == Provisioning {
			return Waiting, true, nil
		}
	case ObservedRunning:
		if from == Provisioning {
			return Running, true, nil
		}
	case ObservedSucceeded, ObservedFailed:
		if from == Provisioning || from == Running {
			if t == ObservedSucceeded {
				return Succeeded, true, nil
			}
			return Failed, true, nil
		}
	case Fail:
		if from.Live() {
			return Failed, true, nil
		}
	case Stop:
		if from.Live() {
			return Stopped, true, nil
		}
		return from, false, &errs.StateError{Kind: "run", ID: id, Op: "stop", State: string(from),
			Allowed: []string{string(Queued), string(Waiting), string(Provisioning), string(Running)}}
	}
	return from, false, nil
}

// Duration returns how long the run ran, so far or in all.
func (r *Run) Duration(now time.Time) time.Duration {
	switch {
	case r.StartedAt.IsZero():
		return 0
	case r.FinishedAt.IsZero():
		return now.Sub(r.StartedAt)
	}
	return r.FinishedAt.Sub(r.StartedAt)
}

// Observation is what a backend reports of a run's Ray job.
type Observation struct {
	State     RunState  // Provisioning (submitted, driver not yet running), Running, Succeeded, Failed or Stopped
	Message   string    // why it failed or stopped
	StartedAt time.Time // when its driver started, if it has
	EndedAt   time.Time // when it ended, if it has
}

// Trigger returns what Ray's observation o means for a run: Ray runs its
// job (ObservedRunning), the job ended (ObservedSucceeded,
// ObservedFailed), or it was stopped on Ray's side, not by the platform
// (Fail); "" when it says nothing new (submitted, not yet running).
func (o Observation) Trigger() RunTrigger {
	switch o.State {
	case Running:
		return ObservedRunning
	case Succeeded:
		return ObservedSucceeded
	case Failed:
		return ObservedFailed
	case Stopped:
		return Fail
	}
	return ""
}

// MaxMessage bounds, in bytes, a message a run takes from Ray (its
// Message and the event that records it): a Ray head is the user's own
// code, and a failed job's message holds its output. A longer message
// keeps its last bytes, where a Python traceback puts the error, after a
// marker saying how much was cut (ClipMessage).
const MaxMessage = 4 << 10

// ClipMessage returns s if it has at most MaxMessage bytes, else its end:
// "[… N bytes cut …]" and the last bytes of s, MaxMessage in all, cut at
// a rune boundary.
func ClipMessage(s string) string {
	if len(s) <= MaxMessage {
		return s
	}
	// The marker's count has at most as many digits as len(s).
	room := len(fmt.Sprintf(cutMarker, len(s)))
	start := len(s) - (MaxMessage - room)
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return fmt.Sprintf(cutMarker, start) + s[start:]
}

const cutMarker = "[… %d bytes cut …] "

// The times an observation may carry: what JSON can hold (RFC 3339 years
// 0 to 9999), from the Unix epoch on (Ray counts milliseconds since then).
var (
	minObservedTime = time.Unix(0, 0).UTC()
	maxObservedTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
)

// Bounded returns o with what a Ray head controls made safe to store:
// Message clipped (ClipMessage), presigned URLs' secrets in it redacted
// (RedactSecrets: a failed job's message holds its output), and StartedAt and EndedAt dropped (zero)
// when they are before the Unix epoch or after year 9999, which no run can
// have and JSON cannot hold.
func (o Observation) Bounded() Observation {
	o.Message = ClipMessage(RedactSecrets(o.Message))
	o.StartedAt = boundedTime(o.StartedAt)
	o.EndedAt = boundedTime(o.EndedAt)
	return o
}

func boundedTime(t time.Time) time.Time {
	if t.Before(minObservedTime) || t.After(maxObservedTime) {
		return time.Time{}
	}
	return t
}

// Pending says why a run waits and where (J18): for an on-demand run, its
// place in its resource group's queue and what quota it lacks; for a run
// on a cluster or a group, the clusters it waits for and their states.
type Pending struct {
	RunID   string     `json:"runID"`
	State   RunState   `json:"state"`
	Reason  WaitReason `json:"reason,omitempty"`
	Message string     `json:"message,omitempty"`
	// ResourceGroup is an on-demand run's resource group.
	ResourceGroup string `json:"resourceGroup,omitempty"`
	// Position is the run's 1-based place in its resource group's
	// admission order (priority, then submission); 0 once admitted. A
	// smaller run behind a head that does not fit may still go first.
	Position int `json:"position,omitempty"`
	// Ahead is how many runs are before it in that order.
	Ahead int `json:"ahead"`
	// Needs is what admitting it reserves; Allocatable what the resource
	// group can allocate now.
	Needs       quota.Resources `json:"needs,omitzero"`
	Allocatable quota.Resources `json:"allocatable,omitzero"`
	// Lacks says it in words, e.g. "needs cpu=8 memory=32Gi gpu=0;
	// allocatable cpu=4 memory=64Gi gpu=0".
	Lacks string `json:"lacks,omitempty"`
	// Clusters are the cluster (cluster mode) or the members (group mode)
	// it waits for, with their states.
	Clusters []ClusterWait `json:"clusters,omitempty"`
}

// ClusterWait is a cluster a run waits for, and its state.
type ClusterWait struct {
	ID    string `json:"id"`
	Name  string `json:"name"`
	State string `json:"state"`
}

// Submitter saves a job config and starts a run of it; *dlc.Client is
// one. A non-empty requestID makes each call idempotent: a retry with the
// same id returns what the first call made.
type Submitter interface {
	SaveJob(ctx context.Context, cfg *Config, requestID string) (*Record, error)
	RunJob(ctx context.Context, jobID, requestID string) (*Run, error)
}

// Submit saves cfg and starts a run of it in one call. When the save
// fails nothing is run; when the run cannot start, the saved record is
// returned with the error so the caller can retry the run. Under a
// requestID the whole call can be retried after a lost reply without
// saving or running twice.
func Submit(ctx context.Context, s Submitter, cfg *Config, requestID string) (*Record, *Run, error) {
	rec, err := s.SaveJob(ctx, cfg, requestID)
	if err != nil {
		return nil, nil, err
	}
	runReq := ""
	if requestID != "" {
		runReq = requestID + "/run"
	}
	run, err := s.RunJob(ctx, rec.ID, runReq)
	if err != nil {
		return rec, nil, err
	}
	return rec, run, nil
}

// Ended is a condition for Runs().Wait: done once the run has ended
// (succeeded, failed or stopped).
func Ended(r *Run) (bool, error) { return r.State.Terminal(), nil }

// InState is a condition for Runs().Wait: done once the run is in one of
// states, or has ended in another: waiting on for a state a run can no
// longer reach is an error (ErrState).
func InState(states ...RunState) func(*Run) (bool, error) {
	return func(r *Run) (bool, error) {
		for _, s := range states {
			if r.State == s {
				return true, nil
			}
		}
		if r.State.Terminal() {
			allowed := make([]string, len(states))
			for i, s := range states {
				allowed[i] = string(s)
			}
			why := "it has ended"
			if r.Message != "" {
				why += " (" + r.Message + ")"
			}
			return false, &errs.StateError{Kind: "run", ID: r.ID, Op: "reach " + strings.Join(allowed, " or "), State: string(r.State), Reason: why}
		}
		return false, nil
	}
}
