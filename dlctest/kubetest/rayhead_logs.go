package kubetest

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"
)

// logsOf is GET /api/jobs/{id}/logs: {"logs": <the whole driver log>}.
// Cite: job_head.py JobHead.get_job_logs: {"logs": ""} with no driver
// agent address, else the driver's agent (job_agent.py
// JobAgent.get_job_logs, which makes the job manager) reads
// job_log_storage_client.py JobLogStorageClient.get_logs: the whole file,
// open(path, "r"), strict UTF-8, universal newlines (facts 35, 36).
func (h *RayHead) logsOf(w http.ResponseWriter, r *http.Request) {
	j, ok := h.lookup(w, r)
	if !ok {
		return
	}
	h.mu.Lock()
	agent, path := j.driverAgent, j.logPath
	// A driver of an earlier head pod: its agent is gone, unless a new
	// head pod's agent answers at the same address.
	gone := agent != "" && j.incarnation != h.incarnation
	sameAddr := agent == "http://"+h.nodeIP+":52365"
	if agent != "" && (!gone || sameAddr) {
		h.recoverLocked() // an agent answers, and makes its job manager
	}
	h.mu.Unlock()
	switch {
	case agent == "":
		pyReply(w, http.StatusOK, newPyDict().set("logs", ""))
		return
	case gone && sameAddr:
		// The new pod's node has no such file: FileNotFoundError → "".
		pyReply(w, http.StatusOK, newPyDict().set("logs", ""))
		return
	case gone:
		// The driver's agent went with its pod: the head cannot reach it.
		// (The exception text is aiohttp's; the facts do not give it.)
		host := agentHost(agent)
		text(w, http.StatusInternalServerError, pyTraceback(
			fmt.Sprintf("aiohttp.client_exceptions.ClientConnectorError: Cannot connect to host %s:52365 ssl:default [Connect call failed ('%s', 52365)]", host, host),
			pyFrame{file: "dashboard/modules/job/job_head.py", fn: "get_job_logs", line: 1, code: "resp = await job_agent_client.get_job_logs_internal(job.submission_id)"}))
		return
	}
	f, err := os.Open(path)
	if err != nil {
		pyReply(w, http.StatusOK, newPyDict().set("logs", "")) // FileNotFoundError → ""
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		aiohttpInternalError(w)
		return
	}
	size := fi.Size()
	if msg, ok := checkUTF8(io.NewSectionReader(f, 0, size)); !ok {
		// Cite: dashboard/optional_utils.py init_ray_and_catch_exceptions
		// answers the agent's UnicodeDecodeError with 500; the head wraps it
		// (job_head.py _raise_error) in another 500 (fact 36).
		agentTB := pyTraceback("UnicodeDecodeError: "+msg,
			pyFrame{file: "dashboard/optional_utils.py", fn: "decorator", line: 1, code: "return await f(self, *args, **kwargs)"},
			pyFrame{file: "dashboard/modules/job/job_agent.py", fn: "get_job_logs", line: 1, code: "logs=self.get_job_manager().get_job_logs(job.submission_id)"},
			pyFrame{file: "dashboard/modules/job/job_manager.py", fn: "get_job_logs", line: 1, code: "return self._log_client.get_logs(job_id)"},
			pyFrame{file: "dashboard/modules/job/job_log_storage_client.py", fn: "get_logs", line: 1, code: "return f.read()"})
		headError(w, http.StatusInternalServerError, agentTB,
			pyFrame{file: "dashboard/modules/job/job_head.py", fn: "get_job_logs", line: 1, code: "resp = await job_agent_client.get_job_logs_internal(job.submission_id)"},
			pyFrame{file: "dashboard/modules/job/job_head.py", fn: "get_job_logs_internal", line: 1, code: "await self._raise_error(resp)"})
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 64<<10)
	_, _ = bw.WriteString(`{"logs": "`)
	_ = writePyJSONText(bw, io.NewSectionReader(f, 0, size))
	_, _ = bw.WriteString(`"}`)
	_ = bw.Flush()
}

func agentHost(agent string) string {
	host := strings.TrimPrefix(agent, "http://")
	if i := strings.LastIndexByte(host, ':'); i >= 0 {
		host = host[:i]
	}
	return host
}

// checkUTF8 reads r through and reports the first strict UTF-8 decoding
// error, as Python's UnicodeDecodeError words it.
func checkUTF8(r io.Reader) (string, bool) {
	buf := make([]byte, 1<<20)
	var carry int
	var off int64
	for {
		n, err := io.ReadFull(r, buf[carry:])
		data := buf[:carry+n]
		final := err == io.EOF || err == io.ErrUnexpectedEOF
		if err != nil && !final {
			return err.Error(), false
		}
		end := len(data)
		if !final {
			end = completeRunes(data)
		}
		if !utf8.Valid(data[:end]) || final && end < len(data) {
			msg, _, _ := pyUnicodeError(data, off, final)
			return msg, false
		}
		if final {
			return "", true
		}
		carry = copy(buf, data[end:])
		off += int64(end)
	}
}

// completeRunes is the length of data less an incomplete UTF-8 sequence
// at its end.
func completeRunes(data []byte) int {
	end := len(data)
	for k := 1; k <= utf8.UTFMax && k <= end; k++ {
		if utf8.RuneStart(data[end-k]) {
			if !utf8.FullRune(data[end-k : end]) {
				return end - k
			}
			break
		}
	}
	return end
}

// pyPlain are the bytes json.dumps writes as they are: ' '..'~' less " and \.
var pyPlain = func() (t [256]bool) {
	for c := ' '; c <= '~'; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// writePyJSONText writes the text of r (valid UTF-8) as the body of a
// json.dumps string, after Python's universal-newline translation (\r\n
// and \r read as \n).
func writePyJSONText(w *bufio.Writer, r io.Reader) error {
	buf := make([]byte, 1<<20)
	var carry int
	cr := false // the last character was a \r
	var sb strings.Builder
	for {
		n, err := io.ReadFull(r, buf[carry:])
		data := buf[:carry+n]
		final := err == io.EOF || err == io.ErrUnexpectedEOF
		if err != nil && !final {
			return err
		}
		end := len(data)
		if !final {
			end = completeRunes(data)
		}
		for i := 0; i < end; {
			c := data[i]
			switch {
			case pyPlain[c]:
				k := i + 1
				for k < end && pyPlain[data[k]] {
					k++
				}
				_, _ = w.Write(data[i:k])
				cr, i = false, k
				continue
			case c == '\r':
				_, _ = w.WriteString(`\n`)
				cr = true
			case c == '\n':
				if !cr {
					_, _ = w.WriteString(`\n`)
				}
				cr = false
			default:
				rn, size := utf8.DecodeRune(data[i:end])
				sb.Reset()
				pyJSONEscapeRune(&sb, rn)
				_, _ = w.WriteString(sb.String())
				cr = false
				i += size
				continue
			}
			i++
		}
		if final {
			return w.Flush()
		}
		carry = copy(buf, data[end:])
	}
}

// stateLogs is the state API's GET /api/v0/logs/file for a job's driver
// log (submission_id): the last `lines` lines (default 1000; 0 → 1000;
// -1: all) as raw bytes. Cite: python/ray/dashboard/state_head.py
// StateHead.get_logs → state_manager / LogsManager._resolve_job_filename
// (the job's driver_node_id, job-driver-{sid}.log) and the agent's
// StreamLog, which opens the file "rb" (fact 38). 2.41 frames the stream
// (format=leading_1, its default: "1" before each chunk, "0" and the error
// on an error, always 200; format=text: raw); 2.46 on is raw, an error
// before the first byte a 500. The chunk size is the stand-in's (1 MiB).
func (h *RayHead) stateLogs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	sid := q.Get("submission_id")
	lines := 1000
	if s := q.Get("lines"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			text(w, http.StatusBadRequest, fmt.Sprintf("invalid literal for int() with base 10: '%s'", s))
			return
		}
		lines = n
	}
	if lines == 0 {
		lines = 1000
	}
	h.mu.Lock()
	j := h.jobs[sid]
	var problem, path string
	switch {
	case j == nil:
		problem = fmt.Sprintf("Could not find a log file. Please make sure the given option exists in the cluster.\n\tnode_id: None\n\tsubmission_id: %s", sid)
	case j.driverNodeID == "":
		problem = fmt.Sprintf("Job %s has no driver node id info. This is likely a bug, please file an issue.", sid)
	case j.incarnation != h.incarnation:
		// The driver's node went with its head pod. (Wording not in the facts.)
		problem = fmt.Sprintf("Agent for node id: %s doesn't exist.", j.driverNodeID)
	default:
		path = j.logPath
	}
	ver := h.ver
	h.mu.Unlock()
	framed := ver < ver246 && q.Get("format") != "text"
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if ver >= ver246 && q.Get("download_filename") != "" {
		w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", q.Get("download_filename")))
	}
	var f *os.File
	if problem == "" {
		var err error
		if f, err = os.Open(path); err != nil {
			problem = err.Error()
		} else {
			defer f.Close()
		}
	}
	if problem != "" {
		switch {
		case ver >= ver246:
			text(w, http.StatusInternalServerError, problem)
		case framed:
			text(w, http.StatusOK, "0Closing HTTP stream due to internal server error.\n"+problem)
		default:
			text(w, http.StatusOK, "[get_logs] Fetch log error: "+problem)
		}
		return
	}
	fi, err := f.Stat()
	if err != nil {
		text(w, http.StatusInternalServerError, err.Error())
		return
	}
	size := fi.Size()
	start := int64(0)
	if lines > 0 {
		start = lastLinesOffset(f, size, lines)
	}
	w.WriteHeader(http.StatusOK)
	buf := make([]byte, 1<<20)
	sr := io.NewSectionReader(f, start, size-start)
	for {
		n, err := io.ReadFull(sr, buf)
		if n > 0 {
			if framed {
				_, _ = io.WriteString(w, "1")
			}
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// lastLinesOffset is where the last n lines of f's first size bytes
// begin; a final newline ends the last line, it does not begin another.
func lastLinesOffset(f *os.File, size int64, n int) int64 {
	const block = 64 << 10
	buf := make([]byte, block)
	end := size
	if end > 0 {
		var last [1]byte
		if _, err := f.ReadAt(last[:], end-1); err == nil && last[0] == '\n' {
			end-- // the final newline belongs to the last line
		}
	}
	seen := 0
	for pos := end; pos > 0; {
		from := max64(0, pos-block)
		chunk := buf[:pos-from]
		if _, err := f.ReadAt(chunk, from); err != nil && err != io.EOF {
			return 0
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			if chunk[i] == '\n' {
				seen++
				if seen == n {
					return from + int64(i) + 1
				}
			}
		}
		pos = from
	}
	return 0
}
