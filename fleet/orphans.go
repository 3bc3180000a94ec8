package fleet

import (
	"context"
	"fmt"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ReasonOrphanRemoved is the reason of the Event an agent writes on its
// Node for every workspace it destroyed because no ProbeSet wants it.
const ReasonOrphanRemoved = "ProbeSetWorkspaceRemoved"

// removeOrphans destroys every workspace the Applier holds on the node
// that is not in want (the workspaces of the ProbeSets in mode apply that
// select the node), each removal logged, counted by the Applier and
// written as an Event on the node. Records play no part: the garbage
// collector or a namespace's deletion may have removed them first.
func (a *NodeAgent) removeOrphans(ctx context.Context, node *Node, want map[string]bool) []error {
	if a.Applier == nil {
		return nil
	}
	held, err := a.Applier.Held(ctx)
	if err != nil {
		return []error{fmt.Errorf("list the node's workspaces: %w", err)}
	}
	sort.Strings(held)
	var errs []error
	for _, ws := range held {
		if want[ws] || !IsWorkspace(ws) {
			continue
		}
		if err := a.Applier.RemoveOrphan(ctx, ws); err != nil {
			errs = append(errs, fmt.Errorf("remove workspace %s, which no ProbeSet wants: %w", ws, err))
			continue
		}
		msg := fmt.Sprintf("removed workspace %s (its programs, links, maps, pins and state): no ProbeSet in mode apply selects node %s", ws, a.Node)
		a.log().Warn("removed an orphaned workspace", "workspace", ws, "reason", "no ProbeSet in mode apply selects this node")
		if err := a.event(ctx, node, msg); err != nil {
			a.log().Error("write the event", "workspace", ws, "err", err)
		}
	}
	return errs
}

// event writes an Event about node, in namespace default (where a Node's
// events go).
func (a *NodeAgent) event(ctx context.Context, node *Node, msg string) error {
	now := metav1.NewTime(time.Now())
	ev := &Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: "default", GenerateName: a.Node + ".probectl-"},
		InvolvedObject: EventObject{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID},
		Reason:         ReasonOrphanRemoved, Message: msg, Type: "Normal",
		Source:         EventSource{Component: "probectl-agent", Host: a.Node},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	return a.Client.Create(ctx, ev)
}
