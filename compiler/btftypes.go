package compiler

import (
	"fmt"
	"strings"

	"github.com/cilium/ebpf/btf"
	"github.com/hashicorp/hcl/v2"
)

// What BTF types say: fields (anonymous members' included), how scalars
// are read, which arrays are strings, and how types are spelled in
// diagnostics and compared across functions.

// member finds a field of a struct or union, in anonymous members too, as
// C does: its offset in bits from the start of comp.
func member(comp btf.Type, name string) (btf.Member, btf.Bits, bool) {
	for _, m := range members(comp) {
		if m.Name == name {
			return m, m.Offset, true
		}
		if m.Name == "" && isComposite(btf.UnderlyingType(m.Type)) {
			if inner, off, ok := member(btf.UnderlyingType(m.Type), name); ok {
				return inner, m.Offset + off, true
			}
		}
	}
	return btf.Member{}, 0, false
}

// memberNames lists the fields a path can name in comp, anonymous members'
// included.
func memberNames(comp btf.Type) []string {
	var names []string
	for _, m := range members(comp) {
		if m.Name != "" {
			names = append(names, m.Name)
		} else if isComposite(btf.UnderlyingType(m.Type)) {
			names = append(names, memberNames(btf.UnderlyingType(m.Type))...)
		}
	}
	return names
}

// fieldList names the first fields of comp, for a diagnostic.
func fieldList(comp btf.Type) string {
	names := memberNames(comp)
	const most = 12
	if len(names) > most {
		return fmt.Sprintf("%s, ... (%d in all)", strings.Join(names[:most], ", "), len(names))
	}
	return strings.Join(names, ", ")
}

func members(comp btf.Type) []btf.Member {
	switch v := comp.(type) {
	case *btf.Struct:
		return v.Members
	case *btf.Union:
		return v.Members
	}
	return nil
}

// isChar reports whether t is char, signed char or unsigned char as
// written (qualifiers aside): not a typedef such as __u8.
func isChar(t btf.Type) bool {
	i, ok := btf.QualifiedType(t).(*btf.Int)
	return ok && i.Size == 1 && strings.HasSuffix(i.Name, "char")
}

func isComposite(t btf.Type) bool {
	switch t.(type) {
	case *btf.Struct, *btf.Union:
		return true
	}
	return false
}

// scalar says how a value of type t is read: its size in bytes and
// whether it is signed. Integers of 1, 2, 4 or 8 bytes, enums and
// pointers are scalars.
func scalar(t btf.Type) (size int, signed, ok bool) {
	switch v := btf.UnderlyingType(t).(type) {
	case *btf.Int:
		size, signed = int(v.Size), v.Encoding&btf.Signed != 0
	case *btf.Enum:
		size, signed = int(v.Size), v.Signed
	case *btf.Pointer:
		return 8, false, true
	default:
		return 0, false, false
	}
	switch size {
	case 1, 2, 4, 8:
		return size, signed, true
	}
	return 0, false, false
}

// prefixRange is the first n bytes of rng, on its first line.
func prefixRange(rng hcl.Range, n int) hcl.Range {
	end := rng.Start
	end.Column += n
	end.Byte += n
	if end.Byte > rng.End.Byte {
		return rng
	}
	rng.End = end
	return rng
}

// cName spells a type as C declares it: "struct file *", "const char *".
func cName(t btf.Type) string {
	switch v := t.(type) {
	case *btf.Pointer:
		if _, fn := btf.UnderlyingType(v.Target).(*btf.FuncProto); fn {
			return "a function pointer"
		}
		return cName(v.Target) + " *"
	case *btf.Array:
		return fmt.Sprintf("%s[%d]", cName(v.Type), v.Nelems)
	case *btf.Const:
		return "const " + cName(v.Type)
	case *btf.Volatile:
		return "volatile " + cName(v.Type)
	case *btf.Restrict:
		return cName(v.Type) + " restrict"
	case *btf.TypeTag:
		return cName(v.Type)
	}
	return cNamedType(t)
}

// cNamedType spells a type that is not built of another as C declares
// it: "void", "int", "struct file".
func cNamedType(t btf.Type) string {
	switch v := t.(type) {
	case nil, *btf.Void:
		return "void"
	case *btf.Int:
		return v.Name
	case *btf.Float:
		return v.Name
	case *btf.Struct:
		return "struct " + orAnonymous(v.Name)
	case *btf.Union:
		return "union " + orAnonymous(v.Name)
	case *btf.Enum:
		return "enum " + orAnonymous(v.Name)
	case *btf.Fwd:
		return v.Kind.String() + " " + v.Name
	case *btf.Typedef:
		return v.Name
	case *btf.FuncProto:
		return "a function"
	}
	return fmt.Sprintf("%T", t)
}

func orAnonymous(name string) string {
	if name == "" {
		return "{...}"
	}
	return name
}

// sameType reports whether two declarations are the same type once
// typedefs and qualifiers are stripped, level by level (size_t and
// unsigned long are; int and unsigned int are not).
func sameType(a, b btf.Type) bool { return canon(a, 0) == canon(b, 0) }

func canon(t btf.Type, depth int) string {
	if depth > 8 {
		return "..."
	}
	switch v := btf.UnderlyingType(t).(type) {
	case *btf.Int:
		return fmt.Sprintf("int%d/%d", v.Size, v.Encoding)
	case *btf.Pointer:
		return canon(v.Target, depth+1) + "*"
	case *btf.Array:
		return fmt.Sprintf("%s[%d]", canon(v.Type, depth+1), v.Nelems)
	case *btf.Fwd:
		return cName(&btf.Struct{Name: v.Name})
	}
	return cName(btf.UnderlyingType(t))
}
