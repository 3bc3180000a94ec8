package runtime

// SetFault installs a hook called before every step that changes the
// kernel or the state; an error fails that step. Tests only.
func (w *Workspace) SetFault(f func(step string) error) { w.fault = f }
