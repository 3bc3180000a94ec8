package kubetest

import (
	"context"
	"fmt"
	"reflect"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// AggregateRoles does once what kube-controller-manager's
// clusterrole-aggregation controller does continually (the lab runs no
// controller manager, so without it the built-in view, edit and admin
// roles grant nothing): every ClusterRole with an aggregationRule gets the
// rules of the ClusterRoles its selectors match, until nothing changes
// (admin takes edit's, edit view's).
func (c *Cluster) AggregateRoles(ctx context.Context) error {
	roles := c.client.RbacV1().ClusterRoles()
	for changed, rounds := true, 0; changed; rounds++ {
		if rounds == 10 {
			return fmt.Errorf("aggregate cluster roles: still changing after %d rounds", rounds)
		}
		changed = false
		list, err := roles.List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("aggregate cluster roles: %w", err)
		}
		for i := range list.Items {
			agg := &list.Items[i]
			if agg.AggregationRule == nil {
				continue
			}
			rules, err := aggregated(agg, list.Items)
			if err != nil {
				return err
			}
			if reflect.DeepEqual(rules, agg.Rules) || len(rules) == 0 && len(agg.Rules) == 0 {
				continue
			}
			agg.Rules = rules
			if _, err := roles.Update(ctx, agg, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("aggregate into %s: %w", agg.Name, err)
			}
			changed = true
		}
	}
	return nil
}

// aggregated are the rules of the roles (other than agg) that agg's
// selectors match.
func aggregated(agg *rbacv1.ClusterRole, roles []rbacv1.ClusterRole) ([]rbacv1.PolicyRule, error) {
	var rules []rbacv1.PolicyRule
	for _, sel := range agg.AggregationRule.ClusterRoleSelectors {
		s, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			return nil, fmt.Errorf("aggregate into %s: %w", agg.Name, err)
		}
		for _, r := range roles {
			if r.Name != agg.Name && s.Matches(labels.Set(r.Labels)) {
				rules = appendNew(rules, r.Rules...)
			}
		}
	}
	return rules, nil
}

// appendNew appends the rules not already in rules, as the controller
// does.
func appendNew(rules []rbacv1.PolicyRule, more ...rbacv1.PolicyRule) []rbacv1.PolicyRule {
	for _, r := range more {
		if !hasRule(rules, r) {
			rules = append(rules, r)
		}
	}
	return rules
}

// hasRule says rules holds r.
func hasRule(rules []rbacv1.PolicyRule, r rbacv1.PolicyRule) bool {
	for _, have := range rules {
		if reflect.DeepEqual(have, r) {
			return true
		}
	}
	return false
}
