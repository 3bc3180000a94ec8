package compiler

import (
	"strings"

	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/probectl/probectl/compiler/internal/emit"
	"github.com/probectl/probectl/spec"
)

// The task's working directory (spec's cwd): task.fs.pwd's dentry walked
// up through d_parent to the root of its mount, then on from the mount
// point in the parent mount (struct mount, around the vfsmount the path
// holds), until the root mount, as the kernel's d_path does and bpftrace's
// opensnoop writes by hand.
//
// The walk is unrolled, spec.CwdDepth steps, rather than a BPF loop: it
// loads on every kernel (bounded loops came in 5.3), the verifier sees
// each step once, and a step is about 40 instructions. What keeps the
// verifier's paths from doubling at each step (a step either appends a
// name or crosses a mount) is that both leave the same state: the
// position is masked to the buffer's range after each name, so the two
// paths meet at each step's end and are pruned there.

// cwdLayout is what the walk reads, byte offsets from the target's BTF.
type cwdLayout struct {
	taskFS      int32 // task_struct.fs
	fsPwd       int32 // fs_struct.pwd (a struct path)
	pathMnt     int32 // path.mnt
	pathDentry  int32 // path.dentry
	dParent     int32 // dentry.d_parent
	dName       int32 // dentry.d_name.name
	mntRoot     int32 // vfsmount.mnt_root
	mountMnt    int32 // mount.mnt (the vfsmount within)
	mntParent   int32 // mount.mnt_parent
	mntPoint    int32 // mount.mnt_mountpoint
	deferred    bool  // the target has no BTF: resolved at apply
	unavailable bool  // an error was reported
}

// cwdField is a field the walk reads: its struct, its member path, and
// where its offset goes.
type cwdField struct {
	st, member string
	off        *int32
}

func (l *cwdLayout) fields() []cwdField {
	return []cwdField{
		{"task_struct", "fs", &l.taskFS},
		{"fs_struct", "pwd", &l.fsPwd},
		{"path", "mnt", &l.pathMnt},
		{"path", "dentry", &l.pathDentry},
		{"dentry", "d_parent", &l.dParent},
		{"dentry", "d_name.name", &l.dName},
		{"vfsmount", "mnt_root", &l.mntRoot},
		{"mount", "mnt", &l.mountMnt},
		{"mount", "mnt_parent", &l.mntParent},
		{"mount", "mnt_mountpoint", &l.mntPoint},
	}
}

// cwdType resolves the walk's offsets for x, once per probe.
func (g *gen) cwdType(x *spec.Var) spec.Type {
	if g.cwd == nil {
		g.cwd = g.resolveCwd(x)
	}
	switch {
	case g.cwd.unavailable:
		return spec.Type{}
	case g.cwd.deferred:
		g.addDeferred(x.Text())
	}
	return x.Type()
}

func (g *gen) resolveCwd(x *spec.Var) *cwdLayout {
	l := &cwdLayout{}
	types, deferred := g.kernelTypes(x)
	switch {
	case deferred:
		l.deferred = true
		return l
	case types == nil:
		l.unavailable = true
		return l
	}
	r := &resolver{g: g, x: x, types: types}
	for _, f := range l.fields() {
		off, ok := r.memberOffset(f.st, f.member)
		if !ok {
			l.unavailable = true
			return l
		}
		*f.off = off
	}
	return l
}

// memberOffset is the byte offset of a member path (d_name.name) in the
// named struct, reported at r.x when the target lacks it.
func (r *resolver) memberOffset(st, path string) (int32, bool) {
	t, ok := r.structNamed(st, r.x.Range())
	if !ok {
		return 0, false
	}
	var off btf.Bits
	text := "struct " + st
	for _, name := range strings.Split(path, ".") {
		comp := btf.UnderlyingType(t)
		m, at, found := member(comp, name)
		if !found || !isComposite(comp) {
			return 0, r.fail(r.x.Range(), "Kernel lacks a field cwd reads",
				"%s reads %s.%s, which the target's BTF does not have: this kernel lays out its working directory differently.", r.x.Text(), text, name)
		}
		off += at
		t = m.Type
		text += "." + name
	}
	return int32(off / 8), true
}

// usesCwd reports whether x is cwd, which reads through the shared work
// area.
func usesCwd(x spec.Expr) bool {
	v, ok := x.(*spec.Var)
	return ok && v.Name == "cwd"
}

// cwdText writes the working directory's names, leaf first, each ended by
// a NUL, into the zeroed place p, at most n bytes: the reader reverses
// them into a path (compiled.KeyPath).
func (g *gen) cwdText(p place, n int) {
	l := g.cwd
	if l == nil || l.deferred || l.unavailable {
		return // a placeholder: never loaded
	}
	n = min(n, spec.CwdSize)
	dentry, mnt, root, pos := g.e.Alloc(8), g.e.Alloc(8), g.e.Alloc(8), g.e.Alloc(8)
	buf, parent, tmp := g.e.Alloc(8), g.e.Alloc(8), g.e.Alloc(8)
	done, out := g.e.NewLabel("cwd"), g.e.NewLabel("cwd_out")

	// read loads *(u64 *)(*from + off) into to (0 if unreadable).
	read := func(to, from int16, off int32) {
		g.e.Emit(
			emit.StoreImm64(asm.RFP, tmp, 0),
			asm.LoadMem(asm.R3, asm.RFP, from, asm.DWord),
			asm.Add.Imm(asm.R3, off),
			asm.Mov.Reg(asm.R1, asm.RFP), asm.Add.Imm(asm.R1, int32(tmp)),
			asm.Mov.Imm(asm.R2, 8),
			asm.FnProbeReadKernel.Call(),
			asm.LoadMem(asm.R1, asm.RFP, tmp, asm.DWord),
			asm.StoreMem(asm.RFP, to, asm.R1, asm.DWord),
		)
	}

	g.e.Emit(
		emit.StoreImm64(asm.RFP, pos, 0),
		asm.StoreImm(asm.RFP, tmp, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, 0).WithReference(refJoin),
		asm.Mov.Reg(asm.R2, asm.RFP), asm.Add.Imm(asm.R2, int32(tmp)),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, done),
		asm.StoreMem(asm.RFP, buf, asm.R0, asm.DWord),
		asm.FnGetCurrentTask.Call(),
		asm.StoreMem(asm.RFP, parent, asm.R0, asm.DWord),
	)
	// fs = task->fs; dentry = fs->pwd.dentry; vfsmnt = fs->pwd.mnt;
	// mnt = container_of(vfsmnt, struct mount, mnt); root = vfsmnt->mnt_root.
	read(parent, parent, l.taskFS)
	read(dentry, parent, l.fsPwd+l.pathDentry)
	read(root, parent, l.fsPwd+l.pathMnt)
	read(root, root, l.mntRoot)
	read(mnt, parent, l.fsPwd+l.pathMnt)
	g.e.Emit(
		asm.LoadMem(asm.R1, asm.RFP, mnt, asm.DWord),
		asm.Sub.Imm(asm.R1, l.mountMnt),
		asm.StoreMem(asm.RFP, mnt, asm.R1, asm.DWord),
	)
	for range spec.CwdDepth {
		cross, next := g.e.NewLabel("cwd_cross"), g.e.NewLabel("cwd_next")
		read(parent, dentry, l.dParent)
		g.e.Emit(
			asm.LoadMem(asm.R1, asm.RFP, dentry, asm.DWord),
			asm.LoadMem(asm.R2, asm.RFP, parent, asm.DWord),
			asm.JEq.Reg(asm.R1, asm.R2, cross),
			asm.LoadMem(asm.R2, asm.RFP, root, asm.DWord),
			asm.JEq.Reg(asm.R1, asm.R2, cross),
		)
		// A directory: its name at buf + pos, then up to its parent. The
		// read is n bytes at pos < n into the 2n-byte area.
		read(tmp, dentry, l.dName)
		g.e.Emit(
			asm.LoadMem(asm.R4, asm.RFP, pos, asm.DWord),
			asm.JGE.Imm(asm.R4, int32(n-1), out),
			asm.LoadMem(asm.R1, asm.RFP, buf, asm.DWord),
			asm.Add.Reg(asm.R1, asm.R4),
			asm.Mov.Imm(asm.R2, int32(n)),
			asm.LoadMem(asm.R3, asm.RFP, tmp, asm.DWord),
			asm.FnProbeReadKernelStr.Call(),
			asm.JSLE.Imm(asm.R0, 0, out),
			asm.LoadMem(asm.R4, asm.RFP, pos, asm.DWord),
			asm.Add.Reg(asm.R4, asm.R0),
			asm.JGE.Imm(asm.R4, int32(n), out),
			asm.And.Imm(asm.R4, int32(spec.CwdSize-1)),
			asm.StoreMem(asm.RFP, pos, asm.R4, asm.DWord),
			asm.LoadMem(asm.R1, asm.RFP, parent, asm.DWord),
			asm.StoreMem(asm.RFP, dentry, asm.R1, asm.DWord),
			asm.Ja.Label(next),
		)
		// The root of a mount: on from its mount point in the parent
		// mount; the root mount (its own parent) ends the walk.
		g.e.Mark(cross)
		read(parent, mnt, l.mntParent)
		g.e.Emit(
			asm.LoadMem(asm.R1, asm.RFP, mnt, asm.DWord),
			asm.LoadMem(asm.R2, asm.RFP, parent, asm.DWord),
			asm.JEq.Reg(asm.R1, asm.R2, out),
		)
		read(dentry, mnt, l.mntPoint)
		g.e.Emit(
			asm.LoadMem(asm.R1, asm.RFP, parent, asm.DWord),
			asm.StoreMem(asm.RFP, mnt, asm.R1, asm.DWord),
		)
		read(root, mnt, l.mountMnt+l.mntRoot)
		g.e.Mark(next)
	}
	// Copy what was read, pos bytes (less than n), into the zeroed place.
	g.e.Mark(out)
	fits := g.e.NewLabel("cwd_fits")
	g.e.Emit(
		asm.LoadMem(asm.R2, asm.RFP, pos, asm.DWord),
		asm.JEq.Imm(asm.R2, 0, done),
		asm.JLT.Imm(asm.R2, int32(n), fits),
		asm.Mov.Imm(asm.R2, int32(n-1)),
	)
	g.e.Mark(fits)
	g.addr(asm.R1, p)
	g.e.Emit(
		asm.LoadMem(asm.R3, asm.RFP, buf, asm.DWord),
		asm.FnProbeReadKernel.Call(),
	)
	g.e.Mark(done)
	g.e.Emit(asm.Mov.Imm(asm.R0, 0))
}
