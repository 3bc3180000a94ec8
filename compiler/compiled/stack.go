package compiled

// buildIDFrame is the size of a struct bpf_stack_build_id.
const buildIDFrame = 32

// StackFrameSize is the size of one frame in a stack map's value: an
// address, or (user stacks) a struct bpf_stack_build_id.
func StackFrameSize(user bool) int {
	if user {
		return buildIDFrame
	}
	return 8
}
