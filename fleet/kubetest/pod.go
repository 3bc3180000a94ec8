package kubetest

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RunPod creates pod on the node (spec.nodeName set: no scheduler) and
// waits until it is Ready, or until it has terminated when its restart
// policy is not Always. It returns the pod as last read.
func (n *Node) RunPod(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	pod.Spec.NodeName = n.Name
	ns := pod.Namespace
	if ns == "" {
		ns = "default"
	}
	created, err := n.c.client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	return n.c.WaitPod(ctx, ns, created.Name, 3*time.Minute)
}

// WaitPod waits until the pod is Ready, or has terminated when its
// restart policy is not Always; a container waiting for a reason that
// will not pass (an image missing, a bad config) ends the wait.
func (c *Cluster) WaitPod(ctx context.Context, namespace, name string, timeout time.Duration) (*corev1.Pod, error) {
	deadline := time.Now().Add(timeout)
	var p *corev1.Pod
	var err error
	for time.Now().Before(deadline) {
		p, err = c.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if done, err := podDone(p); done || err != nil {
			return p, err
		}
		time.Sleep(300 * time.Millisecond)
	}
	return p, fmt.Errorf("pod %s/%s not ready after %s: %s", namespace, name, timeout, PodSummary(p))
}

func podDone(p *corev1.Pod) (bool, error) {
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		return true, nil
	case corev1.PodFailed:
		return true, fmt.Errorf("pod %s failed: %s", p.Name, PodSummary(p))
	}
	if p.Spec.RestartPolicy == corev1.RestartPolicyAlways || p.Spec.RestartPolicy == "" {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && (w.Reason == "ErrImageNeverPull" || w.Reason == "CreateContainerConfigError" ||
			w.Reason == "CreateContainerError" || w.Reason == "InvalidImageName") {
			return true, fmt.Errorf("pod %s: %s", p.Name, PodSummary(p))
		}
	}
	return false, nil
}

// PodSummary is a line on a pod's phase, conditions and containers.
func PodSummary(p *corev1.Pod) string {
	if p == nil {
		return "no pod"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "phase %s", p.Status.Phase)
	for _, cond := range p.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			fmt.Fprintf(&b, "; %s=%s %s %s", cond.Type, cond.Status, cond.Reason, cond.Message)
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		fmt.Fprintf(&b, "; container %s restarts %d", cs.Name, cs.RestartCount)
		if w := cs.State.Waiting; w != nil {
			fmt.Fprintf(&b, " waiting %s: %s", w.Reason, w.Message)
		}
		if t := cs.State.Terminated; t != nil {
			fmt.Fprintf(&b, " terminated %s (exit %d): %s", t.Reason, t.ExitCode, t.Message)
		}
		if t := cs.LastTerminationState.Terminated; t != nil {
			fmt.Fprintf(&b, " last terminated %s (exit %d)", t.Reason, t.ExitCode)
		}
	}
	return b.String()
}
