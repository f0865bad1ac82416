package cluster

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/check"
	"github.com/aidlc/dlc/quota"
	"github.com/aidlc/dlc/storage"
)

// Catalogs are what validation looks names up in: node specs and built-in
// images. The zero Catalogs means the defaults.
type Catalogs struct {
	Nodes  quota.Catalog
	Images ImageCatalog
}

// DefaultCatalogs returns the built-in node spec and image catalogs.
func DefaultCatalogs() Catalogs {
	return Catalogs{Nodes: quota.DefaultCatalog(), Images: DefaultImages()}
}

func (c Catalogs) orDefault() Catalogs {
	if c.Nodes.Len() == 0 {
		c.Nodes = quota.DefaultCatalog()
	}
	if c.Images.refs == nil {
		c.Images = DefaultImages()
	}
	return c
}

// Rules names the rule IDs that environment validation reports: a
// cluster's environment answers to C5, C7 and C8, an on-demand job's to
// J7.
type Rules struct {
	Image, Head, Workers string
}

var (
	clusterRules = Rules{Image: "C5", Head: "C7", Workers: "C8"}
	// JobRules are the rule IDs for an on-demand job's environment (J7).
	JobRules = Rules{Image: "J7", Head: "J7", Workers: "J7"}
)

var clusterName = regexp.MustCompile(`^[\p{Han}A-Za-z0-9_]+$`)

// Validate checks the spec against every rule a spec alone can break,
// with the default catalogs, and returns every problem at once (nil when
// valid). errors.Is(err, errs.ErrInvalid) holds for the result, and
// errs.Fields(err) lists each *errs.FieldError with its path and rule.
func (s *Spec) Validate() error { return s.ValidateWith(Catalogs{}) }

// ValidateWith is Validate with the given catalogs.
func (s *Spec) ValidateWith(c Catalogs) error { return s.Problems(c).ToError() }

// Problems returns the spec's problems as a list.
func (s *Spec) Problems(c Catalogs) errs.List {
	c = c.orDefault()
	var l errs.List
	l = append(l, ValidateName(errs.NewPath("name"), s.Name)...)
	p := errs.NewPath("groups")
	if len(s.Groups) == 0 {
		l = append(l, errs.Required(p, "C2", "a cluster joins at least one cluster group"))
	} else if len(s.Groups) > MaxGroups {
		l = append(l, errs.TooMany(p, "C2", len(s.Groups), MaxGroups))
	}
	seen := map[string]bool{}
	for i, g := range s.Groups {
		switch {
		case strings.TrimSpace(g) == "":
			l = append(l, errs.Required(p.Index(i), "C2", "a cluster group id"))
		case !check.IsID(g):
			l = append(l, check.ID(p.Index(i), "C2", "cluster group", g)...)
		case seen[g]:
			l = append(l, errs.Duplicate(p.Index(i), "C2", g))
		}
		seen[g] = true
	}
	l = append(l, check.Priority(errs.NewPath("priority"), "C3", s.Priority)...)
	l = append(l, check.Tags(errs.NewPath("tags"), "C3", s.Tags)...)
	if s.ResourcePackage == "" {
		l = append(l, errs.Required(errs.NewPath("resourcePackage"), "C4", "the resource package the cluster draws from"))
	} else {
		l = append(l, check.ID(errs.NewPath("resourcePackage"), "C4", "resource package", s.ResourcePackage)...)
	}
	if s.ResourceGroup == "" {
		l = append(l, errs.Required(errs.NewPath("resourceGroup"), "C4", "the resource group the cluster draws from"))
	} else {
		l = append(l, check.ID(errs.NewPath("resourceGroup"), "C4", "resource group", s.ResourceGroup)...)
	}
	l = append(l, s.Environment.Problems(c, clusterRules)...)
	l = append(l, s.Environment.SecretScopeProblems(s.ResourceGroup, clusterRules)...)
	l = append(l, storage.ValidateMounts(errs.NewPath("mounts"), "C9", s.Mounts)...)
	l = append(l, check.Advanced(errs.NewPath("advanced"), "C10", MaxAdvanced, s.Advanced)...)
	l = append(l, s.rayTokenProblems(c)...)
	if t := s.IdleTimeoutSeconds; t < 0 || t > MaxIdleTimeout {
		l = append(l, errs.Invalid(errs.NewPath("idleTimeoutSeconds"), "L4", t,
			fmt.Sprintf("must be 0 (never hibernated for idling) to %d seconds", MaxIdleTimeout)))
	}
	return l
}

// ValidateName checks a cluster name (C1): required; Chinese characters,
// English letters, digits and underscore; at most 64 characters.
func ValidateName(p errs.Path, name string) errs.List {
	switch {
	case name == "":
		return errs.List{errs.Required(p, "C1", "a cluster needs a name")}
	case utf8.RuneCountInString(name) > MaxNameLen:
		return errs.List{errs.TooLong(p, "C1", name, MaxNameLen)}
	case !clusterName.MatchString(name):
		return errs.List{errs.Invalid(p, "C1", name, "a cluster name holds Chinese characters, English letters, digits and '_' only")}
	}
	return nil
}

// Validate checks the environment with the default catalogs and the
// cluster's rule IDs.
func (e *Environment) Validate() error { return e.Problems(Catalogs{}, clusterRules).ToError() }

// Problems checks the image, the head group and 1–7 worker groups with
// unique names and known node specs (C5, C7, C8, J7), reporting the rule
// IDs in r.
func (e *Environment) Problems(c Catalogs, r Rules) errs.List {
	c = c.orDefault()
	var l errs.List
	if e.Image == "" {
		l = append(l, errs.Required(errs.NewPath("image"), r.Image, "a built-in image name or a registry address"))
	} else if msg := c.Images.problem(e.Image); msg != "" {
		l = append(l, errs.Invalid(errs.NewPath("image"), r.Image, e.Image, msg))
	}
	names := map[string]errs.Path{}
	hp := errs.NewPath("headGroup")
	l = append(l, e.Head.NodeGroup.problems(hp, r.Head, c.Nodes)...)
	if e.Head.Name != "" {
		names[e.Head.Name] = hp
	}
	wp := errs.NewPath("workerGroups")
	switch n := len(e.Workers); {
	case n < MinWorkerGroups:
		l = append(l, errs.Required(wp, r.Workers, "at least one worker group"))
	case n > MaxWorkerGroups:
		l = append(l, errs.TooMany(wp, r.Workers, n, MaxWorkerGroups))
	}
	total := 0
	for i, w := range e.Workers {
		ip := wp.Index(i)
		// Clamped, so that the sum cannot overflow; a group over the limit
		// is reported on its own.
		total += min(max(w.Instances.MaxOrMin(), 0), MaxInstances+1)
		l = append(l, w.NodeGroup.problems(ip, r.Workers, c.Nodes)...)
		if _, dup := names[w.Name]; dup && w.Name != "" {
			l = append(l, &errs.FieldError{Path: ip.Child("name"), Rule: r.Workers, Type: errs.TypeDuplicate,
				BadValue: w.Name, Detail: "node group names are unique in a cluster (also against the head group)"})
		} else if w.Name != "" {
			names[w.Name] = ip
		}
		l = append(l, w.Instances.problems(ip.Child("instances"), r.Workers)...)
	}
	if total > MaxClusterInstances {
		l = append(l, errs.Invalid(wp, r.Workers, total, fmt.Sprintf(
			"the worker groups' max instances add up to at most %d in one cluster", MaxClusterInstances)))
	}
	return l
}

func (g *NodeGroup) problems(p errs.Path, rule string, nodes quota.Catalog) errs.List {
	var l errs.List
	l = append(l, check.NodeGroupName(p.Child("name"), rule, g.Name)...)
	sp := p.Child("nodeSpec")
	if g.NodeSpec == "" {
		l = append(l, errs.Required(sp, rule, "a CU or GU node spec from the catalog"))
	} else if _, ok := nodes.Lookup(g.NodeSpec); !ok {
		// Every catalog entry meets the node limits: NewCatalog checks them.
		l = append(l, errs.Invalid(sp, rule, g.NodeSpec, nodes.UnknownDetail(g.NodeSpec)))
	}
	l = append(l, EnvProblems(p, rule, g.Env, g.SecretEnv)...)
	l = append(l, check.NodeLabels(p.Child("labels"), rule, g.Labels)...)
	l = append(l, check.LogicalResources(p.Child("resources"), rule, g.Resources)...)
	return l
}

func (in Instances) problems(p errs.Path, rule string) errs.List {
	var l errs.List
	atMost := fmt.Sprintf("at most %d instances in one worker group", MaxInstances)
	switch {
	case in.Min < 0:
		l = append(l, errs.Invalid(p.Child("min"), rule, in.Min, "at least 0"))
	case in.Min > MaxInstances:
		l = append(l, errs.Invalid(p.Child("min"), rule, in.Min, atMost))
	}
	switch {
	case in.Max == nil:
		l = append(l, errs.Required(p.Child("max"), rule, "the most instances the group may scale to"))
	case *in.Max < 1:
		l = append(l, errs.Invalid(p.Child("max"), rule, *in.Max, "at least 1"))
	case *in.Max > MaxInstances:
		l = append(l, errs.Invalid(p.Child("max"), rule, *in.Max, atMost))
	case *in.Max < in.Min:
		l = append(l, errs.Invalid(p.Child("max"), rule, *in.Max, "must be at least min ("+strconv.Itoa(in.Min)+")"))
	}
	return l
}

// Validate checks the template: a name and a valid environment (C6).
func (t *Template) Validate() error { return t.Problems(Catalogs{}).ToError() }

// Problems returns the template's problems as a list.
func (t *Template) Problems(c Catalogs) errs.List {
	l := check.Name(errs.NewPath("name"), "C6", "template", t.Name, MaxTemplateNameLen)
	switch dp := errs.NewPath("description"); {
	case utf8.RuneCountInString(t.Description) > MaxDescriptionLen:
		l = append(l, errs.TooLong(dp, "C6", t.Description, MaxDescriptionLen))
	case !utf8.ValidString(t.Description) || strings.ContainsRune(t.Description, 0):
		l = append(l, errs.Invalid(dp, "C6", t.Description, "a description is valid UTF-8 without NUL"))
	}
	return append(l, t.Environment.Problems(c, clusterRules)...)
}

// MinTokenRay is the first Ray version with token authentication
// (RAY_AUTH_MODE=token).
const MinTokenRay = "2.52"

// rayTokenProblems checks RayToken (C10): a Secret key as a variable's,
// a built-in image of a Ray that has token authentication, and no node
// group setting the variables it sets.
func (s *Spec) rayTokenProblems(c Catalogs) errs.List {
	if s.RayToken == nil {
		return nil
	}
	p := errs.NewPath("rayToken")
	l := check.SecretName(p.Child("secret"), "C10", s.RayToken.Secret, SecretEnvPrefix)
	if len(l) == 0 && check.IsID(s.ResourceGroup) && !strings.HasPrefix(s.RayToken.Secret, SecretScope(s.ResourceGroup)) {
		l = append(l, scopeProblem(p.Child("secret"), "C10", s.ResourceGroup, s.RayToken.Secret))
	}
	l = append(l, check.SecretKey(p.Child("key"), "C10", s.RayToken.Key)...)
	if _, ok := c.Images.Lookup(s.Image); ok {
		if v, ok := RayVersion(s.Image); ok && !versionAtLeast(v, MinTokenRay) {
			l = append(l, errs.Invalid(p, "C10", s.Image,
				fmt.Sprintf("image %s runs Ray %s, which has no token authentication (Ray >= %s)", s.Image, v, MinTokenRay)))
		}
	}
	for _, k := range RayTokenEnv {
		if g, ok := s.GroupSetting(k); ok {
			l = append(l, errs.Invalid(p, "C10", k, "node group "+g+" sets "+k+", which rayToken sets on every node"))
		}
	}
	return l
}

// RayTokenEnv are the variables a cluster's RayToken sets on every node.
var RayTokenEnv = []string{"RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"}

// RayVersion returns the Ray version ("2.46") of a built-in image name
// ("ray-2.46.0-py310-cpu"), and whether the name says one.
func RayVersion(image string) (string, bool) {
	rest, ok := strings.CutPrefix(image, "ray-")
	if !ok {
		return "", false
	}
	ver, _, _ := strings.Cut(rest, "-")
	parts := strings.Split(ver, ".")
	if len(parts) < 2 {
		return "", false
	}
	for _, n := range parts[:2] {
		if _, err := strconv.Atoi(n); err != nil {
			return "", false
		}
	}
	return parts[0] + "." + parts[1], true
}

// versionAtLeast compares two "major.minor" versions.
func versionAtLeast(v, min string) bool {
	var a, b, c, d int
	_, _ = fmt.Sscanf(v, "%d.%d", &a, &b)
	_, _ = fmt.Sscanf(min, "%d.%d", &c, &d)
	return a > c || (a == c && b >= d)
}
