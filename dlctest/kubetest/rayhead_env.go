package kubetest

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// The Ray versions a head stand-in can be (RayHeadOptions.RayVersion). The
// behaviours that differ between them are cited where they are modelled;
// the versions are dated by their features (see each citation), not by a
// release tag.
const (
	// RayVersion241 is Ray 2.41: the state API's log endpoint frames each
	// chunk with a leading "1" unless format=text; no error_type; no token
	// authentication.
	RayVersion241 = "2.41"
	// RayVersion246 is Ray 2.46, the default: raw state-API logs (500 on an
	// error before the first byte); the azure protocol; no error_type; no
	// token authentication.
	RayVersion246 = "2.46"
	// RayVersion252 is Ray 2.52: error_type set on failures, token
	// authentication, the "Running entrypoint for job" log line, and the
	// newer protocols (http, abfss, local) and archive suffixes.
	RayVersion252 = "2.52"
)

type rayVersion int

const (
	ver241 rayVersion = iota
	ver246
	ver252
)

func parseRayVersion(s string) (rayVersion, bool) {
	switch s {
	case RayVersion241:
		return ver241, true
	case "", RayVersion246:
		return ver246, true
	case RayVersion252:
		return ver252, true
	}
	return 0, false
}

// protocols are the runtime_env URI protocols and the remote ones among
// them. Cite: python/ray/_private/runtime_env/protocol.py, ProtocolsProvider
// get_protocols / get_remote_protocols: MID has gcs, conda, pip, uv, https,
// s3, gs, file (remote: https, s3, gs, file); a later MID variant adds
// azure; NEW adds abfss, http and local (fact 14).
func (v rayVersion) protocols() (all []string, remote []string) {
	all = []string{"gcs", "conda", "pip", "uv", "https", "s3", "gs", "file"}
	remote = []string{"https", "s3", "gs", "file"}
	if v >= ver246 {
		all, remote = append(all, "azure"), append(remote, "azure")
	}
	if v >= ver252 {
		all = append(all, "abfss", "http", "local")
		remote = append(remote, "abfss", "http")
	}
	return all, remote
}

// pyURL is what Python's urllib.parse.urlsplit makes of a URL.
type pyURL struct{ scheme, netloc, path, query, fragment string }

var schemeRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

func urlSplit(s string) pyURL {
	var u pyURL
	if m := schemeRE.FindString(s); m != "" {
		u.scheme, s = strings.ToLower(m[:len(m)-1]), s[len(m):]
	}
	if rest, ok := strings.CutPrefix(s, "//"); ok {
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		u.netloc, s = rest[:end], rest[end:]
	}
	s, u.fragment, _ = strings.Cut(s, "#")
	u.path, u.query, _ = strings.Cut(s, "?")
	return u
}

// pyErr is a Python exception the stand-in raises: its type, its str()
// and the frames it went through.
type pyErr struct {
	typ, msg string
	frames   []pyFrame
}

func (e *pyErr) Error() string { return e.msg }

func (e *pyErr) traceback(outer ...pyFrame) string {
	return pyTraceback(e.typ+": "+e.msg, append(outer, e.frames...)...)
}

func valueError(msg string, frames ...pyFrame) *pyErr {
	return &pyErr{typ: "ValueError", msg: msg, frames: frames}
}

func typeError(msg string, frames ...pyFrame) *pyErr {
	return &pyErr{typ: "TypeError", msg: msg, frames: frames}
}

// workingDir is a validated runtime_env working_dir.
type workingDir struct {
	uri      string // as submitted
	local    bool   // a path on the head (is_path), used as it is
	protocol string
	pkg      string // the package name (parse_uri), the per-node cache key
}

// remote reports whether the working dir is downloaded on each node.
func (w workingDir) remote() bool { return w.uri != "" && !w.local }

// runtimeEnv is a job's runtime_env as the stand-in uses it.
type runtimeEnv struct {
	workingDir workingDir
	envVars    [][2]string
}

var (
	frameRuntimeEnv = pyFrame{file: "runtime_env/runtime_env.py", fn: "__init__", line: 1, code: "raise ValueError("}
	frameValidation = pyFrame{file: "_private/runtime_env/validation.py", fn: "parse_and_validate_working_dir", line: 1}
)

// parseRuntimeEnv validates a runtime_env as RuntimeEnv(**runtime_env) does
// when the job manager creates the supervisor actor (fact 7). Cite:
// python/ray/runtime_env/runtime_env.py RuntimeEnv.__init__ (the pip/uv/
// conda, container and image_uri checks, facts 9-11) and
// python/ray/_private/runtime_env/validation.py parse_and_validate_* (fact
// 13, 16). Unknown keys are kept, not refused (fact 12).
func (v rayVersion) parseRuntimeEnv(env *pyDict) (runtimeEnv, *pyErr) {
	var re runtimeEnv
	if env == nil {
		return re, nil
	}
	env = env.withoutNulls()
	// Cite: runtime_env.py RuntimeEnv.__init__: at most one of pip, uv, conda (fact 9).
	pip, _ := env.get("pip")
	uv, _ := env.get("uv")
	conda, _ := env.get("conda")
	if n := btoi(pip != nil) + btoi(uv != nil) + btoi(conda != nil); n > 1 {
		return re, valueError("The 'pip' field, 'uv' field, and 'conda' field of runtime_env cannot be specified at the same time.\n"+
			"specified pip field: "+pyStr(pip)+"\nspecified conda field: "+pyStr(conda)+"\nspecified uv field: "+pyStr(uv)+"\n"+
			"To use pip with conda, please only set the 'conda'field, and specify your pip dependencies within the conda YAML config dict: "+
			"see https://conda.io/projects/conda/en/latest/user-guide/tasks/manage-environments.html#create-env-file-manually", frameRuntimeEnv)
	}
	// Cite: runtime_env.py RuntimeEnv.__init__: container and image_uri go
	// only with config and env_vars (facts 10, 11).
	for _, field := range []string{"container", "image_uri"} {
		if x, _ := env.get(field); !pyTruthy(x) {
			continue
		}
		var invalid []string
		for _, k := range env.keys {
			if k != field && k != "config" && k != "env_vars" {
				invalid = append(invalid, k)
			}
		}
		if len(invalid) > 0 {
			return re, valueError(fmt.Sprintf("The '%s' field currently cannot be used together with other fields of runtime_env. Specified fields: %s",
				field, pySet(invalid)), frameRuntimeEnv)
		}
	}
	// Cite: validation.py OPTION_TO_VALIDATION_FN, in its order.
	if x, ok := env.get("working_dir"); ok {
		wd, err := v.parseWorkingDir(x)
		if err != nil {
			return re, err
		}
		re.workingDir = wd
	}
	if x, ok := env.get("excludes"); ok {
		if l, isList := x.([]any); !isList || slices.ContainsFunc(l, func(e any) bool { _, s := e.(string); return !s }) {
			return re, typeError("runtime_env['excludes'] must be of type List[str], got " + pyType(x))
		}
	}
	if conda != nil {
		switch c := conda.(type) {
		case string:
			if ext := filepath.Ext(c); ext == ".yaml" || ext == ".yml" {
				if fi, err := os.Stat(c); err != nil || !fi.Mode().IsRegular() {
					return re, valueError("Can't find conda YAML file " + c + ".")
				}
			}
		case *pyDict:
		default:
			return re, typeError("runtime_env['conda'] must be of type str or dict, got " + pyType(conda) + ".")
		}
	}
	for _, pm := range []struct {
		name   string
		val    any
		fields []string
		msg    string
	}{
		{"pip", pip, []string{"packages", "pip_check", "pip_install_options", "pip_version"}, "packages, pip_check, pip_install_options and pip_version"},
		{"uv", uv, []string{"packages", "uv_check", "uv_version", "uv_pip_install_options"}, "packages, uv_check, uv_version and uv_pip_install_options"},
	} {
		switch p := pm.val.(type) {
		case nil, []any:
		case string:
			if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() {
				return re, valueError(p + " is not a valid file")
			}
		case *pyDict:
			if slices.ContainsFunc(p.keys, func(k string) bool { return !slices.Contains(pm.fields, k) }) {
				keys := make([]any, len(p.keys))
				for i, k := range p.keys {
					keys[i] = k
				}
				return re, valueError(fmt.Sprintf("runtime_env['%s'] can only have these fields: %s, but got: %s", pm.name, pm.msg, pyRepr(keys)))
			}
		default:
			return re, typeError(fmt.Sprintf("runtime_env['%s'] must be of type str or List[str], got %s", pm.name, pyType(pm.val)))
		}
	}
	// Cite: validation.py parse_and_validate_env_vars: Dict[str, str] (fact 13).
	if x, ok := env.get("env_vars"); ok {
		d, isDict := x.(*pyDict)
		if !isDict {
			return re, typeError("runtime_env['env_vars'] must be of type Dict[str, str], got " + pyType(x))
		}
		for _, k := range d.keys {
			s, isStr := d.vals[k].(string)
			if !isStr {
				return re, typeError(fmt.Sprintf("runtime_env['env_vars'] must be of type Dict[str, str], but the value %s is of type %s",
					pyStr(d.vals[k]), pyType(d.vals[k])))
			}
			re.envVars = append(re.envVars, [2]string{k, s})
		}
	}
	return re, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// parseWorkingDir validates a working_dir. Cite:
// python/ray/_private/runtime_env/validation.py
// parse_and_validate_working_dir / validate_uri and
// python/ray/_private/runtime_env/packaging.py parse_uri (facts 15-17): a
// path (no URL scheme, _private/path_utils.py is_path) must exist
// (validate_path); a URI needs a known protocol, and a remote one a
// .zip or .whl package (NEW: also .tar.gz, .tgz), judged on the URL path,
// the query dropped.
func (v rayVersion) parseWorkingDir(x any) (workingDir, *pyErr) {
	s, ok := x.(string)
	if !ok {
		return workingDir{}, typeError("`working_dir` must be a string, got "+pyType(x)+".", frameValidation)
	}
	u := urlSplit(s)
	if u.scheme == "" {
		// Cite: validation.py validate_path (later MID): the path must exist.
		// The message is the stand-in's: the facts do not give Ray's.
		if _, err := os.Stat(s); err != nil {
			return workingDir{}, valueError(s+" is not a valid path", frameValidation)
		}
		return workingDir{uri: s, local: true}, nil
	}
	all, remote := v.protocols()
	if !slices.Contains(all, u.scheme) {
		// Cite: validation.py validate_uri swallows parse_uri's "Invalid protocol" error.
		return workingDir{}, valueError(s+" is not a valid URI. Passing directories or modules to be dynamically uploaded is only supported at the job level (i.e., passed to `ray.init`).", frameValidation)
	}
	wd := workingDir{uri: s, protocol: u.scheme, pkg: u.netloc}
	if !slices.Contains(remote, u.scheme) {
		return wd, nil
	}
	wd.pkg = v.packageName(u)
	suffixes := []string{".zip", ".whl"}
	msg := "Only .zip or .whl files supported for remote URIs."
	if v >= ver252 {
		suffixes = append(suffixes, ".tar.gz", ".tgz")
		msg = "Only .zip, .whl, .tar.gz, and .tgz files supported for remote URIs."
	}
	if !slices.ContainsFunc(suffixes, func(sfx string) bool { return strings.HasSuffix(wd.pkg, sfx) }) {
		return workingDir{}, valueError(msg, frameValidation)
	}
	return wd, nil
}

// packageName is parse_uri's package name of a remote URI (Cite:
// packaging.py parse_uri, fact 15): protocol_netlocpath with / : @ + and
// space made _, every dot but the last made _; a .whl keeps its base name.
func (v rayVersion) packageName(u pyURL) string {
	if strings.HasSuffix(u.path, ".whl") {
		return u.path[strings.LastIndexByte(u.path, '/')+1:]
	}
	name := strings.NewReplacer("/", "_", ":", "_", "@", "_", "+", "_", " ", "_").Replace(u.scheme + "_" + u.netloc + u.path)
	suffix := ""
	if v >= ver252 && strings.HasSuffix(name, ".tar.gz") {
		name, suffix = strings.TrimSuffix(name, ".tar.gz"), ".tar.gz"
	}
	if i := strings.LastIndexByte(name, '.'); i >= 0 && suffix == "" {
		return strings.ReplaceAll(name[:i], ".", "_") + name[i:]
	}
	return strings.ReplaceAll(name, ".", "_") + suffix
}

// errSetup is a runtime_env setup failure of the stand-in's own making
// (a protocol it does not serve, a missing Fetch).
type errSetup string

func (e errSetup) Error() string { return string(e) }

// download fetches a remote working_dir package by its full URI (query
// included: cite packaging.py download_and_unpack_package →
// protocol.download_remote_uri → smart_open.open(uri), fact 20) and counts
// it. https (and http at 2.52) go through Fetch, else FetchHTTP; s3, gs,
// azure and abfss through Fetch only; file:// is read from the local path;
// gcs (Ray's own package store) and the rest are not served.
func (h *RayHead) download(ctx context.Context, wd workingDir) ([]byte, error) {
	h.mu.Lock()
	h.fetches[wd.uri]++
	h.mu.Unlock()
	var rc io.ReadCloser
	var err error
	switch wd.protocol {
	case "https", "http":
		fetch := h.opts.Fetch
		if fetch == nil {
			fetch = FetchHTTP
		}
		rc, err = fetch(ctx, wd.uri)
	case "s3", "gs", "azure", "abfss":
		if h.opts.Fetch == nil {
			extra := map[string]string{"s3": "s3", "gs": "gcs", "azure": "azure", "abfss": "azure"}[wd.protocol]
			return nil, errSetup(fmt.Sprintf("You must `pip install smart_open[%s]` to fetch %s URIs. Note that these must be preinstalled on all nodes in the Ray cluster; it is not sufficient to specify them in the runtime_env. (dlctest: the Ray head stand-in fetches %s:// only through RayHeadOptions.Fetch.)",
				extra, strings.ToUpper(wd.protocol), wd.protocol))
		}
		rc, err = h.opts.Fetch(ctx, wd.uri)
	case "file":
		rc, err = os.Open(urlSplit(wd.uri).path)
	default:
		return nil, errSetup(fmt.Sprintf("dlctest: the Ray head stand-in cannot fetch %s: it keeps no %s:// packages", wd.uri, wd.protocol))
	}
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, 256<<20))
}

// FetchHTTP is the default Fetch of a Ray head stand-in for https (and,
// at 2.52, http) working_dir URIs: an HTTP GET of url with the default
// client; a status other than 200 is an error. A test's own Fetch can fall
// back to it for the URLs it does not serve.
func FetchHTTP(ctx context.Context, url string) (io.ReadCloser, error) {
	return FetchWith(http.DefaultClient)(ctx, url)
}

// FetchWith returns a Fetch that GETs a working_dir URL with hc (e.g. a
// client that trusts a TLS test server's certificate, as
// cosfake.Server.Client gives); a status other than 200 is an error.
func FetchWith(hc *http.Client) func(ctx context.Context, url string) (io.ReadCloser, error) {
	return func(ctx context.Context, url string) (io.ReadCloser, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			return nil, fmt.Errorf("GET working_dir: %s", resp.Status)
		}
		return resp.Body, nil
	}
}

// unpack unpacks a downloaded package into dir as
// download_and_unpack_package does (cite packaging.py, fact 20): a .zip
// (and a .tar.gz/.tgz at 2.52) with a single top-level directory flattened;
// a .whl, which Ray pip-installs into the directory, is unzipped as it is.
func unpack(wd workingDir, data []byte, dir string) error {
	switch {
	case strings.HasSuffix(wd.pkg, ".whl"):
		return unzip(data, dir, false)
	case strings.HasSuffix(wd.pkg, ".tar.gz"), strings.HasSuffix(wd.pkg, ".tgz"):
		return untar(data, dir)
	}
	return unzip(data, dir, true)
}

// unzip unpacks a ZIP into dir; with flatten, if every entry (__MACOSX
// aside) is under one top-level directory, that directory's content
// becomes dir's.
func unzip(data []byte, dir string, flatten bool) error {
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return fmt.Errorf("working_dir is not a ZIP: %w", err)
	}
	names := make([]string, len(zr.File))
	for i, f := range zr.File {
		names[i] = f.Name
	}
	prefix := ""
	if flatten {
		prefix = commonTop(names)
	}
	for _, f := range zr.File {
		if strings.HasPrefix(f.Name, "__MACOSX/") {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			return err
		}
		err = writeEntry(dir, strings.TrimPrefix(f.Name, prefix), f.Mode(), rc)
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func untar(data []byte, dir string) error {
	read := func(each func(h *tar.Header, r io.Reader) error) error {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return fmt.Errorf("working_dir is not a .tar.gz: %w", err)
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return err
			}
			if err := each(h, tr); err != nil {
				return err
			}
		}
	}
	var names []string
	if err := read(func(h *tar.Header, _ io.Reader) error { names = append(names, h.Name); return nil }); err != nil {
		return err
	}
	prefix := commonTop(names)
	return read(func(h *tar.Header, r io.Reader) error {
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		return writeEntry(dir, strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), prefix), h.FileInfo().Mode(), r)
	})
}

func writeEntry(dir, name string, mode os.FileMode, r io.Reader) error {
	if name == "" || strings.HasSuffix(name, "/") {
		return nil
	}
	p := filepath.Join(dir, filepath.FromSlash(name))
	if !strings.HasPrefix(p, filepath.Clean(dir)+string(filepath.Separator)) {
		return fmt.Errorf("working_dir entry %q leaves the directory", name)
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	out, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode.Perm()|0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, io.LimitReader(r, 256<<20))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

func commonTop(names []string) string {
	top := ""
	for _, n := range names {
		n = strings.TrimPrefix(n, "./")
		if strings.HasPrefix(n, "__MACOSX/") || n == "" {
			continue
		}
		first, _, nested := strings.Cut(n, "/")
		if !nested {
			return ""
		}
		if top == "" {
			top = first
		} else if top != first {
			return ""
		}
	}
	if top == "" {
		return ""
	}
	return top + "/"
}
