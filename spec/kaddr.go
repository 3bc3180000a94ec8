package spec

import (
	"strconv"

	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// MaxSymbolLen is the longest kernel symbol: the kernel's KSYM_NAME_LEN
// (512 since 6.1) less its terminating NUL.
const MaxSymbolLen = 511

// KernelSymbol says whether name could name a kernel symbol: letters,
// digits, _ and ., not first a digit, at most MaxSymbolLen bytes.
func KernelSymbol(name string) bool {
	if name == "" || len(name) > MaxSymbolLen || name[0] >= '0' && name[0] <= '9' {
		return false
	}
	for i := range len(name) {
		b := name[i]
		if !(b == '_' || b == '.' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9') {
			return false
		}
	}
	return true
}

// kaddr lowers kaddr("SYMBOL"), a kernel variable's address.
func (s *scope) kaddr(e *hclsyntax.FunctionCallExpr) Expr {
	name, ok := "", len(e.Args) == 1
	if ok {
		name, ok = s.d.literalString(e.Args[0])
	}
	if !ok {
		return s.errorf(e.Range(), "Expected a kernel symbol", "kaddr takes one kernel symbol's name, quoted: kaddr(\"avenrun\").")
	}
	if !KernelSymbol(name) {
		return s.errorf(e.Args[0].Range(), "Invalid kernel symbol "+strconv.Quote(name),
			"A kernel symbol is letters, digits, _ and . (not first a digit), at most %d bytes, as /proc/kallsyms names them: kaddr(\"avenrun\").", MaxSymbolLen)
	}
	return &KernelAddr{exprBase: s.base(e, TypeInt), Symbol: name}
}

// kernelU64 lowers kernel_u64(ADDR), 8 bytes of kernel memory.
func (s *scope) kernelU64(e *hclsyntax.FunctionCallExpr) Expr {
	if len(e.Args) != 1 {
		return s.errorf(e.Range(), "Wrong number of arguments", "kernel_u64 takes one kernel address: kernel_u64(kaddr(\"avenrun\") + 8).")
	}
	x := s.lower(e.Args[0])
	if isInvalid(x) {
		return x
	}
	if !x.Type().Numeric() {
		return s.errorf(x.Range(), "kernel_u64 needs an address", "%s is a %s, not an address.", x.Text(), x.Type())
	}
	return &KernelRead{exprBase: s.base(e, TypeInt), X: x}
}
