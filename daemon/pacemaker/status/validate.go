package status

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"

	etcdv1 "github.com/openshift/api/etcd/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The rules below are the PacemakerCluster CRD's (openshift/api etcd/v1 and
// etcd/v1alpha1, identical schemas), checked in Go before every write so
// that a status the API server would reject is never sent: one bad field
// rejects the whole update. crd_test.go compares these tables with the CRD
// manifests shipped in the openshift/api module.

// bounds are minItems/maxItems of lists and minLength/maxLength of strings.
type bounds struct{ min, max int }

// schemaBounds maps a schema path ("[]" for list items) to its bounds.
var schemaBounds = map[string]bounds{
	"status.conditions":                         {3, 8},
	"status.nodes":                              {0, maxNodes},
	"status.nodes[].conditions":                 {9, 16},
	"status.nodes[].nodeName":                   {1, 253},
	"status.nodes[].addresses":                  {1, 8},
	"status.nodes[].addresses[].address":        {1, 39},
	"status.nodes[].resources":                  {2, 8},
	"status.nodes[].resources[].conditions":     {8, 16},
	"status.nodes[].fencingAgents":              {0, maxFencingAgents},
	"status.nodes[].fencingAgents[].conditions": {8, 16},
	"status.nodes[].fencingAgents[].name":       {1, maxAgentName},
}

// conditionBounds apply to the fields of every metav1.Condition.
var conditionBounds = map[string]bounds{
	"type":    {0, 316},
	"reason":  {1, 1024},
	"message": {0, maxMessage},
}

// schemaEnums are the CRD's enum fields.
var schemaEnums = map[string][]string{
	"status.nodes[].addresses[].type":       {string(etcdv1.PacemakerNodeInternalIP)},
	"status.nodes[].resources[].name":       {string(etcdv1.PacemakerClusterResourceNameKubelet), string(etcdv1.PacemakerClusterResourceNameEtcd)},
	"status.nodes[].fencingAgents[].method": {string(etcdv1.FencingMethodRedfish), string(etcdv1.FencingMethodIPMI)},
}

// requiredConditions are the "conditions must contain a condition of type
// X" rules, per list.
var requiredConditions = map[string][]string{
	"status.conditions": {etcdv1.ClusterHealthyConditionType, etcdv1.ClusterInServiceConditionType, etcdv1.ClusterNodeCountAsExpectedConditionType},
	"status.nodes[].conditions": {etcdv1.NodeHealthyConditionType, etcdv1.NodeOnlineConditionType, etcdv1.NodeInServiceConditionType,
		etcdv1.NodeActiveConditionType, etcdv1.NodeReadyConditionType, etcdv1.NodeCleanConditionType, etcdv1.NodeMemberConditionType,
		etcdv1.NodeFencingAvailableConditionType, etcdv1.NodeFencingHealthyConditionType},
	"status.nodes[].resources[].conditions":     resourceConditionTypes,
	"status.nodes[].fencingAgents[].conditions": resourceConditionTypes,
}

var resourceConditionTypes = []string{etcdv1.ResourceHealthyConditionType, etcdv1.ResourceInServiceConditionType,
	etcdv1.ResourceManagedConditionType, etcdv1.ResourceEnabledConditionType, etcdv1.ResourceOperationalConditionType,
	etcdv1.ResourceActiveConditionType, etcdv1.ResourceStartedConditionType, etcdv1.ResourceSchedulableConditionType}

// Patterns of the metav1.Condition schema.
var (
	conditionTypePattern   = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$`)
	conditionReasonPattern = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)
)

// Validate checks obj as the API server would on a write of its status.
// prev is the stored object, nil when creating.
func Validate(obj, prev Object) error {
	var errs field.ErrorList
	if obj == nil {
		return fmt.Errorf("no object")
	}
	if obj.GetName() != ObjectName {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), obj.GetName(), "PacemakerCluster must be named 'cluster'"))
	}
	s, has, err := FromObject(obj)
	if err != nil {
		return err
	}
	old, hadStatus, err := FromObject(prev)
	if err != nil {
		return fmt.Errorf("previous object: %w", err)
	}
	switch {
	case !has && hadStatus:
		errs = append(errs, field.Forbidden(field.NewPath("status"), "status may not be removed once set"))
	case has:
		errs = append(errs, validateStatus(s, old)...)
	}
	return errs.ToAggregate()
}

func validateStatus(s, prev *Status) field.ErrorList {
	p := field.NewPath("status")
	errs := validateConditions(p.Child("conditions"), "status.conditions", s.Conditions)
	if s.LastUpdated.IsZero() {
		errs = append(errs, field.Required(p.Child("lastUpdated"), ""))
	} else if prev != nil && !prev.LastUpdated.IsZero() && s.LastUpdated.Before(&prev.LastUpdated) {
		errs = append(errs, field.Invalid(p.Child("lastUpdated"), s.LastUpdated, "lastUpdated may not be set to an earlier timestamp"))
	}
	np := p.Child("nodes")
	if s.Nodes == nil {
		return append(errs, field.Required(np, ""))
	}
	errs = append(errs, checkItems(np, "status.nodes", len(s.Nodes))...)
	names := map[string]bool{}
	for i, n := range s.Nodes {
		ip := np.Index(i)
		if names[n.Name] {
			errs = append(errs, field.Duplicate(ip.Child("nodeName"), n.Name))
		}
		names[n.Name] = true
		errs = append(errs, checkLength(ip.Child("nodeName"), "status.nodes[].nodeName", n.Name)...)
		if len(validation.IsDNS1123Subdomain(n.Name)) > 0 {
			errs = append(errs, field.Invalid(ip.Child("nodeName"), n.Name, "nodeName must be a lowercase RFC 1123 subdomain consisting of lowercase alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"))
		}
		errs = append(errs, validateConditions(ip.Child("conditions"), "status.nodes[].conditions", n.Conditions)...)
		errs = append(errs, checkItems(ip.Child("addresses"), "status.nodes[].addresses", len(n.Addresses))...)
		for j, a := range n.Addresses {
			ap := ip.Child("addresses").Index(j).Child("address")
			errs = append(errs, checkLength(ap, "status.nodes[].addresses[].address", a)...)
			if !validAddress(a) {
				errs = append(errs, field.Invalid(ap, a, "must be a valid global unicast IPv4 or IPv6 address in canonical form"))
			}
		}
		errs = append(errs, validateResources(ip.Child("resources"), n.Resources)...)
		errs = append(errs, validateAgents(ip.Child("fencingAgents"), n.FencingAgents)...)
	}
	return errs
}

func validateResources(p *field.Path, rs []Resource) field.ErrorList {
	errs := checkItems(p, "status.nodes[].resources", len(rs))
	var names []string
	for i, r := range rs {
		rp := p.Index(i)
		if slices.Contains(names, r.Name) {
			errs = append(errs, field.Duplicate(rp.Child("name"), r.Name))
		}
		names = append(names, r.Name)
		errs = append(errs, checkEnum(rp.Child("name"), "status.nodes[].resources[].name", r.Name)...)
		errs = append(errs, validateConditions(rp.Child("conditions"), "status.nodes[].resources[].conditions", r.Conditions)...)
	}
	for _, want := range schemaEnums["status.nodes[].resources[].name"] {
		if !slices.Contains(names, want) {
			errs = append(errs, field.Invalid(p, names, "resources must contain a resource named "+want))
		}
	}
	return errs
}

func validateAgents(p *field.Path, as []FencingAgent) field.ErrorList {
	if len(as) == 0 {
		// The CRD requires the field and the Go type marks it omitempty:
		// an empty list is dropped from the JSON and then rejected as
		// missing, so MinItems=0 can never actually be sent.
		return field.ErrorList{field.Required(p, "an empty list is omitted from the JSON (omitempty) and the CRD requires the field")}
	}
	errs := checkItems(p, "status.nodes[].fencingAgents", len(as))
	names := map[string]bool{}
	for i, a := range as {
		ap := p.Index(i)
		if names[a.Name] {
			errs = append(errs, field.Invalid(p, a.Name, "fencing agent names must be unique"))
		}
		names[a.Name] = true
		errs = append(errs, checkLength(ap.Child("name"), "status.nodes[].fencingAgents[].name", a.Name)...)
		if !agentNamePattern.MatchString(a.Name) {
			errs = append(errs, field.Invalid(ap.Child("name"), a.Name, "name must contain only alphanumeric characters, dots, hyphens, and underscores"))
		}
		errs = append(errs, checkEnum(ap.Child("method"), "status.nodes[].fencingAgents[].method", a.Method)...)
		errs = append(errs, validateConditions(ap.Child("conditions"), "status.nodes[].fencingAgents[].conditions", a.Conditions)...)
	}
	return errs
}

// validateConditions checks a condition list: bounds, unique types (it is
// a map list keyed by type), the required types and each condition.
func validateConditions(p *field.Path, schemaPath string, conds []metav1.Condition) field.ErrorList {
	errs := checkItems(p, schemaPath, len(conds))
	types := map[string]bool{}
	for i, c := range conds {
		cp := p.Index(i)
		if types[c.Type] {
			errs = append(errs, field.Duplicate(cp.Child("type"), c.Type))
		}
		types[c.Type] = true
		if !conditionTypePattern.MatchString(c.Type) {
			errs = append(errs, field.Invalid(cp.Child("type"), c.Type, "must match "+conditionTypePattern.String()))
		}
		if !conditionReasonPattern.MatchString(c.Reason) {
			errs = append(errs, field.Invalid(cp.Child("reason"), c.Reason, "must match "+conditionReasonPattern.String()))
		}
		for _, f := range []struct{ name, value string }{{"type", c.Type}, {"reason", c.Reason}, {"message", c.Message}} {
			if b := conditionBounds[f.name]; len(f.value) < b.min || len(f.value) > b.max {
				errs = append(errs, field.Invalid(cp.Child(f.name), len(f.value), fmt.Sprintf("length must be between %d and %d", b.min, b.max)))
			}
		}
		switch c.Status {
		case metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown:
		default:
			errs = append(errs, field.NotSupported(cp.Child("status"), c.Status, []string{"True", "False", "Unknown"}))
		}
		if c.LastTransitionTime.IsZero() {
			errs = append(errs, field.Required(cp.Child("lastTransitionTime"), ""))
		}
	}
	for _, want := range requiredConditions[schemaPath] {
		if !types[want] {
			errs = append(errs, field.Invalid(p, len(conds), "conditions must contain a condition of type "+want))
		}
	}
	return errs
}

func checkItems(p *field.Path, schemaPath string, n int) field.ErrorList {
	b := schemaBounds[schemaPath]
	switch {
	case n < b.min:
		return field.ErrorList{field.Invalid(p, n, fmt.Sprintf("must have at least %d items", b.min))}
	case n > b.max:
		return field.ErrorList{field.TooMany(p, n, b.max)}
	}
	return nil
}

func checkLength(p *field.Path, schemaPath, v string) field.ErrorList {
	b := schemaBounds[schemaPath]
	if len(v) < b.min || len(v) > b.max {
		return field.ErrorList{field.Invalid(p, v, fmt.Sprintf("length must be between %d and %d", b.min, b.max))}
	}
	return nil
}

func checkEnum(p *field.Path, schemaPath, v string) field.ErrorList {
	if allowed := schemaEnums[schemaPath]; !slices.Contains(allowed, v) {
		return field.ErrorList{field.NotSupported(p, v, allowed)}
	}
	return nil
}

// validAddress is the CEL rule isIP(self) && ip.isCanonical(self) &&
// ip(self).isGlobalUnicast(): Kubernetes' CEL IP library rejects zones and
// IPv4-mapped IPv6 addresses.
func validAddress(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && a.Zone() == "" && !a.Is4In6() && a.String() == s && a.IsGlobalUnicast()
}
