package storage

import (
	"context"
	"strings"
)

// Limits of the symlink check. Every symlink of an archive is resolved as
// a file system would resolve it once the archive is unpacked, following
// the archive's other symlinks, to make sure it stays inside the tree.
// Each symlink is resolved once; a link reached again through another
// reuses that result, so the work is at most one step per segment of the
// links' names and targets, and those are bounded by MaxSymlinks and
// MaxSymlinkBytes.
const (
	// MaxSymlinkDepth is the most symlinks that resolving one symlink may
	// go through, the link itself and every link reached through its
	// target (and theirs, each time one is reached) included. Linux gives
	// up at 40 as well (ELOOP). A symlink that needs more is refused.
	MaxSymlinkDepth = 40
	// MaxSymlinks is the most symlink entries an archive may hold. Each
	// costs a read of its local header and target (a ranged GET for a
	// package in COS); an archive with more is refused.
	MaxSymlinks = 10000
	// MaxSymlinkBytes is the most bytes that the names and targets of an
	// archive's symlinks may come to in all; it bounds the resolution
	// work (one step per name or target segment at most). An archive
	// with more is refused.
	MaxSymlinkBytes = 1 << 20
)

// linkVerdict is what resolving a symlink found.
type linkVerdict uint8

const (
	linkUnvisited linkVerdict = iota
	linkBusy                  // being resolved: reaching it again is a loop
	linkInside                // resolves to a path inside the tree
	linkOut                   // points out of the tree
	linkLoop                  // its resolution needs itself
	linkDeep                  // goes through more than MaxSymlinkDepth links
)

// linkPos is a resolved path: a node of the resolver's tree, plus how
// many more segments lie below it that lead to no symlink (a path outside
// the tree of link names, where only ".." can matter).
type linkPos struct {
	node  int32
	below int
}

// symlink is one symlink of the archive and, once resolved, where it
// points.
type symlink struct {
	name, target string
	node         int32 // the tree node of name
	verdict      linkVerdict
	follows      int // links resolving it goes through, itself included
	res          linkPos
}

// linkEdge names a node's child.
type linkEdge struct {
	from int32
	seg  string
}

// linkFrame is a symlink being resolved: the rest of its target, where
// the walk has got to and the links followed so far.
type linkFrame struct {
	link    int32
	rest    string
	pos     linkPos
	follows int
}

// linkResolver resolves the symlinks of an archive against the tree of
// their names. Node 0 is the root; every prefix of a link's name is a
// node, and no other path is.
type linkResolver struct {
	ctx      context.Context
	maxDepth int
	links    []symlink
	parent   []int32 // by node
	linkAt   []int32 // by node: the symlink there, or -1
	child    map[linkEdge]int32
	steps    int // segments walked, for the work bound
}

// newLinkResolver builds the tree of the links' names (names as stored,
// '/'-separated, without a trailing '/'); names and targets are parallel
// and names unique.
func newLinkResolver(ctx context.Context, names, targets []string, maxDepth int) *linkResolver {
	r := &linkResolver{
		ctx:      ctx,
		maxDepth: maxDepth,
		links:    make([]symlink, len(names)),
		parent:   []int32{0},
		linkAt:   []int32{-1},
		child:    make(map[linkEdge]int32, len(names)),
	}
	for i, name := range names {
		node := int32(0)
		for rest := name; ; {
			seg, more, found := strings.Cut(rest, "/")
			r.steps++
			e := linkEdge{node, seg}
			c, ok := r.child[e]
			if !ok {
				c = int32(len(r.parent))
				r.parent = append(r.parent, node)
				r.linkAt = append(r.linkAt, -1)
				r.child[e] = c
			}
			node = c
			if !found {
				break
			}
			rest = more
		}
		r.links[i] = symlink{name: name, target: targets[i], node: node}
		r.linkAt[node] = int32(i)
	}
	return r
}

// resolveAll resolves every link; afterwards each has a verdict other
// than linkUnvisited and linkBusy. It fails only when ctx is done.
func (r *linkResolver) resolveAll() error {
	if err := r.ctx.Err(); err != nil {
		return err
	}
	for i := range r.links {
		if r.links[i].verdict == linkUnvisited {
			if err := r.resolve(int32(i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// absoluteTarget reports whether a link target is absolute (on Unix or on
// Windows), which always points out of the tree.
func absoluteTarget(t string) bool {
	return strings.HasPrefix(t, "/") || strings.HasPrefix(t, `\`) || (len(t) >= 2 && t[1] == ':')
}

// resolve resolves link start and every unresolved link its target goes
// through, with an explicit stack rather than recursion: a chain of links
// may be as long as the archive allows.
func (r *linkResolver) resolve(start int32) error {
	var stack []linkFrame
	// fail gives every link being resolved the verdict v: each of them
	// goes through the one that failed.
	fail := func(v linkVerdict) {
		for _, f := range stack {
			r.links[f.link].verdict = v
		}
		stack = stack[:0]
	}
	// push starts resolving link m, reached from the frame on top.
	push := func(m int32) {
		l := &r.links[m]
		if absoluteTarget(l.target) {
			l.verdict = linkOut
			fail(linkOut)
			return
		}
		l.verdict = linkBusy
		stack = append(stack, linkFrame{link: m, rest: l.target, pos: linkPos{node: r.parent[l.node]}, follows: 1})
		if len(stack) > r.maxDepth {
			// The bottom link goes through all the others on the stack,
			// which is more than it may: it is refused, and the others
			// go on without it.
			r.links[stack[0].link].verdict = linkDeep
			stack = stack[1:]
		}
	}
	push(start)
	for len(stack) > 0 {
		top := &stack[len(stack)-1]
		if top.rest == "" {
			l := &r.links[top.link]
			l.verdict, l.res, l.follows = linkInside, top.pos, top.follows
			stack = stack[:len(stack)-1]
			if len(stack) > 0 {
				up := &stack[len(stack)-1]
				up.pos = l.res
				if up.follows += l.follows; up.follows > r.maxDepth {
					fail(linkDeep)
				}
			}
			continue
		}
		seg, rest := top.rest, ""
		for i := 0; i < len(seg); i++ {
			if c := seg[i]; c == '/' || c == '\\' {
				seg, rest = seg[:i], seg[i+1:]
				break
			}
		}
		top.rest = rest
		if r.steps++; r.steps%1024 == 0 {
			if err := r.ctx.Err(); err != nil {
				return err
			}
		}
		p := &top.pos
		switch {
		case seg == "" || seg == ".":
		case seg == "..":
			switch {
			case p.below > 0:
				p.below--
			case p.node == 0:
				fail(linkOut)
			default:
				p.node = r.parent[p.node]
			}
		case p.below > 0:
			p.below++
		default:
			c, ok := r.child[linkEdge{p.node, seg}]
			if !ok {
				p.below = 1
				break
			}
			p.node = c
			m := r.linkAt[c]
			if m < 0 {
				break
			}
			switch l := &r.links[m]; l.verdict {
			case linkInside:
				p.node, p.below = l.res.node, l.res.below
				if top.follows += l.follows; top.follows > r.maxDepth {
					fail(linkDeep)
				}
			case linkBusy:
				fail(linkLoop)
			case linkUnvisited:
				push(m)
			default:
				fail(l.verdict)
			}
		}
	}
	return nil
}
