package cluster

import (
	"fmt"
	"sort"
	"strings"

	"github.com/aidlc/dlc/errs"
	"github.com/aidlc/dlc/internal/check"
)

// DefaultRegistry is where the built-in images live.
const DefaultRegistry = "ccr.ccs.tencentyun.com/aidlc/ray"

// ImageCatalog maps built-in image names (a Ray version with its Python
// version and CPU or GPU flavour, e.g. "ray-2.46.0-py310-gpu") to registry
// references. Make one with NewImageCatalog; it is immutable.
type ImageCatalog struct {
	refs map[string]string
}

// NewImageCatalog returns a catalog of built-in images, after checking
// that every reference is a valid registry address.
func NewImageCatalog(images map[string]string) (ImageCatalog, error) {
	var l errs.List
	c := ImageCatalog{refs: make(map[string]string, len(images))}
	for _, name := range errs.SortedKeys(images) {
		ref := images[name]
		p := errs.NewPath("images").Key(name)
		if name == "" || strings.ContainsAny(name, "/: ") {
			l = append(l, errs.Invalid(p, "C5", name, "a built-in image name has no '/', ':' or spaces"))
		}
		if msg := check.ImageRefProblem(ref); msg != "" {
			l = append(l, errs.Invalid(p, "C5", ref, msg))
		}
		c.refs[name] = ref
	}
	if err := l.ToError(); err != nil {
		return ImageCatalog{}, err
	}
	return c, nil
}

// Lookup returns the reference of a built-in image.
func (c ImageCatalog) Lookup(name string) (string, bool) {
	r, ok := c.refs[name]
	return r, ok
}

// Names returns the built-in image names in order.
func (c ImageCatalog) Names() []string { return errs.SortedKeys(c.refs) }

// Resolve returns the registry reference that image stands for: a built-in
// name's reference, or a custom registry address as it is. builtin tells
// which; custom images run as user "ray" (C5).
func (c ImageCatalog) Resolve(image string) (ref string, builtin bool, err error) {
	if r, ok := c.refs[image]; ok {
		return r, true, nil
	}
	if msg := c.problem(image); msg != "" {
		return "", false, errs.List{errs.Invalid("image", "C5", image, msg)}.ToError()
	}
	return image, false, nil
}

// problem returns what is wrong with image, or "".
func (c ImageCatalog) problem(image string) string {
	if _, ok := c.refs[image]; ok {
		return ""
	}
	if image != "" && !strings.ContainsAny(image, "/:@") {
		names := c.Names()
		sort.Strings(names)
		return fmt.Sprintf("no built-in image %q; built-in images: %s; or give a registry address such as %s:2.46.0",
			image, strings.Join(names, ", "), "ccr.ccs.tencentyun.com/<namespace>/<repository>")
	}
	return check.ImageRefProblem(image)
}

var defaultImages = func() ImageCatalog {
	m := map[string]string{}
	for _, v := range []struct{ ray, py string }{
		{"2.52.0", "py311"}, {"2.46.0", "py310"}, {"2.46.0", "py311"}, {"2.41.0", "py310"}, {"2.41.0", "py39"},
	} {
		for _, flavour := range []string{"cpu", "gpu"} {
			tag := v.ray + "-" + v.py
			if flavour == "gpu" {
				tag += "-cu121"
			}
			m["ray-"+v.ray+"-"+v.py+"-"+flavour] = DefaultRegistry + ":" + tag
		}
	}
	c, err := NewImageCatalog(m)
	if err != nil {
		panic(err) // fixed data; a test covers it
	}
	return c
}()

// DefaultImages returns the built-in image catalog.
func DefaultImages() ImageCatalog { return defaultImages }
