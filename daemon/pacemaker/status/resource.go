package status

import (
	"fmt"
	"slices"
	"strings"

	"github.com/etcdlet/etcdlet/daemon/pacemaker/crmmon"
	"github.com/etcdlet/etcdlet/daemon/pacemaker/model"
	etcdv1 "github.com/openshift/api/etcd/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// startedRoles are the roles in which a resource runs. crm_mon shows a
// pending operation as the role: a resource being promoted, demoted or
// migrated runs throughout (from Unpromoted to Promoted, or the reverse),
// so it is Started; one Starting does not run yet and one Stopping is on
// its way out, so neither is.
var startedRoles = []string{crmmon.RoleStarted, crmmon.RolePromoted, crmmon.RoleUnpromoted, "Promoting", "Demoting", "Migrating"}

// resourceConditions computes the eight resource conditions, Healthy
// first. node is the node the resource is reported under; nil for a
// fencing device, whose host is not the node it is listed under.
// selector describes how the resource was looked for (for a Missing one).
func resourceConditions(c *model.Cluster, r *model.Resource, node *model.Node, fallbackName, selector string) []metav1.Condition {
	subject := fallbackName
	if len(r.IDs) > 0 {
		subject = strings.Join(r.IDs, "+")
	}
	missing := r.Placement == model.Missing
	missingMsg := "no pacemaker resource matches " + selector

	managed := r.Managed
	enabled := crmmon.Of(r.Disabled == "")
	schedulable := crmmon.Of(!r.Blocked.Or(false) && r.Banned == "")
	if missing {
		// Nothing is configured that could be (un)managed, disabled or
		// blocked: unknown, not false.
		managed, schedulable = crmmon.Unknown, crmmon.Unknown
		if r.Disabled == "" {
			enabled = crmmon.Unknown
		}
	}

	here, why := where(r, node), whyNotRunning(c, r, node, missingMsg)
	parts := []metav1.Condition{
		condition(etcdv1.ResourceInServiceConditionType, crmmon.Of(r.Maintenance == ""),
			etcdv1.ResourceInServiceReasonInService, etcdv1.ResourceInServiceReasonInMaintenance,
			subject+" is not in maintenance", subject+" is in maintenance: "+r.Maintenance),
		condition(etcdv1.ResourceManagedConditionType, managed,
			etcdv1.ResourceManagedReasonManaged, etcdv1.ResourceManagedReasonUnmanaged,
			subject+" is managed by pacemaker", unmanagedMessage(r, subject)),
		condition(etcdv1.ResourceEnabledConditionType, enabled,
			etcdv1.ResourceEnabledReasonEnabled, etcdv1.ResourceEnabledReasonDisabled,
			subject+" is enabled", subject+" is disabled: "+r.Disabled),
		operationalCondition(r, node, subject),
		condition(etcdv1.ResourceActiveConditionType, crmmon.Of(r.Placement == model.Here && r.Active.IsTrue()),
			etcdv1.ResourceActiveReasonActive, etcdv1.ResourceActiveReasonInactive,
			subject+" is active"+here, subject+" is not active"+why),
		condition(etcdv1.ResourceStartedConditionType, crmmon.Of(r.Placement == model.Here && slices.Contains(startedRoles, r.Role)),
			etcdv1.ResourceStartedReasonStarted, etcdv1.ResourceStartedReasonStopped,
			subject+" is "+r.Role+here, subject+" is "+roleOrStopped(r)+why),
		condition(etcdv1.ResourceSchedulableConditionType, schedulable,
			etcdv1.ResourceSchedulableReasonSchedulable, etcdv1.ResourceSchedulableReasonUnschedulable,
			subject+" can be scheduled", unschedulableMessage(r, node, subject)),
	}
	if missing {
		for i := range parts {
			if parts[i].Status == metav1.ConditionUnknown {
				parts[i].Message = missingMsg
			}
		}
	}
	msg := subject + " is healthy"
	ok := allTrue(parts)
	if !ok {
		msg = summarize(parts)
	}
	return append([]metav1.Condition{
		aggregate(etcdv1.ResourceHealthyConditionType, ok, etcdv1.ResourceHealthyReasonHealthy, etcdv1.ResourceHealthyReasonUnhealthy, msg),
	}, parts...)
}

func operationalCondition(r *model.Resource, node *model.Node, subject string) metav1.Condition {
	failed := r.Failed
	if r.Failure != nil {
		failed = crmmon.True
	}
	if failed == crmmon.Unknown && r.Placement == model.Missing {
		failed = crmmon.False // nothing configured, nothing failed
	}
	trueMsg := "no failure recorded for " + subject
	if r.Placement == model.Missing {
		trueMsg = "no failure recorded (no resource is configured)"
	}
	if r.Recovered != nil {
		trueMsg = subject + " recovered from: " + failureMessage(r.Recovered, subject)
	}
	falseMsg := subject + " has failed"
	switch {
	case r.Failure != nil:
		falseMsg = failureMessage(r.Failure, subject)
	case node != nil:
		falseMsg = fmt.Sprintf("pacemaker marks %s as failed on %s", subject, node.Name)
	}
	if r.FailCount != "" {
		suffix := "; fail-count " + r.FailCount
		trueMsg += suffix
		falseMsg += suffix
	}
	return condition(etcdv1.ResourceOperationalConditionType, failed.Not(),
		etcdv1.ResourceOperationalReasonOperational, etcdv1.ResourceOperationalReasonFailed, trueMsg, falseMsg)
}

func failureMessage(f *crmmon.Failure, subject string) string {
	task := f.Task
	if task == "monitor" && f.Interval == 0 {
		task = "probe"
	}
	msg := fmt.Sprintf("%s of %s failed on %s", task, subject, f.Node)
	if !f.LastRCChange.IsZero() {
		msg += " at " + stamp(f.LastRCChange)
	}
	detail := f.ExitStatus
	if f.ExitCode >= 0 {
		detail = fmt.Sprintf("exit %d %s", f.ExitCode, f.ExitStatus)
	}
	if f.ExitReason != "" {
		return fmt.Sprintf("%s: %s (%s)", msg, f.ExitReason, strings.TrimSpace(detail))
	}
	return fmt.Sprintf("%s (%s)", msg, strings.TrimSpace(detail))
}

func unmanagedMessage(r *model.Resource, subject string) string {
	if r.Maintenance != "" {
		return subject + " is not managed by pacemaker: " + r.Maintenance
	}
	if r.Blocked.IsTrue() {
		// crm_mon reports a blocked resource (a failed stop with
		// on-fail=block, say) as unmanaged too; is-managed is not the cause.
		return subject + " is not managed by pacemaker: it is blocked after a failure pacemaker cannot recover from"
	}
	return subject + " is not managed by pacemaker (is-managed=false)"
}

func unschedulableMessage(r *model.Resource, node *model.Node, subject string) string {
	blocked := subject + " is blocked: pacemaker can neither start, stop nor recover it"
	if r.Banned != "" && node != nil {
		banned := fmt.Sprintf("%s is banned from %s by location constraint %s", subject, node.Name, r.Banned)
		if r.Blocked.IsTrue() {
			return banned + "; " + blocked
		}
		return banned
	}
	return blocked
}

func roleOrStopped(r *model.Resource) string {
	if r.Placement == model.Here && r.Role != "" {
		return r.Role
	}
	return crmmon.RoleStopped
}

// where says where a running resource runs.
func where(r *model.Resource, node *model.Node) string {
	switch {
	case node == nil:
		return " on " + strings.Join(r.RunsOn, ", ")
	case r.OnUncleanNode:
		return " on " + node.Name + " as far as pacemaker last knew (the node is unclean)"
	default:
		return " on " + node.Name
	}
}

// whyNotRunning explains a resource that is not running, most specific
// cause first.
func whyNotRunning(c *model.Cluster, r *model.Resource, node *model.Node, missingMsg string) string {
	var why []string
	switch r.Placement {
	case model.Missing:
		return ": " + missingMsg
	case model.Elsewhere:
		why = append(why, "it runs on "+strings.Join(r.RunsOn, ", ")+" only")
	case model.Here:
		if node == nil {
			why = append(why, "on "+strings.Join(r.RunsOn, ", "))
		} else {
			why = append(why, "on "+node.Name)
		}
	}
	if node != nil {
		switch {
		case node.Unclean.IsTrue():
			why = append(why, "node is unclean")
		case node.Online.IsFalse():
			why = append(why, "node is offline")
		case node.Standby.IsTrue() && !node.Pending.IsTrue():
			why = append(why, "node is in standby")
		}
	}
	// With no-quorum-policy=ignore, lost quorum stops nothing: not a cause.
	if c.WithQuorum.IsFalse() && !strings.EqualFold(c.NoQuorumPolicy, "ignore") {
		why = append(why, "the partition has no quorum and no-quorum-policy is "+c.NoQuorumPolicy)
	}
	if r.Disabled != "" {
		why = append(why, r.Disabled)
	}
	if r.Banned != "" {
		why = append(why, "banned by "+r.Banned)
	}
	if r.Failure != nil {
		why = append(why, "its last "+r.Failure.Task+" failed")
	}
	if len(why) == 0 {
		return ""
	}
	return " (" + strings.Join(why, "; ") + ")"
}
