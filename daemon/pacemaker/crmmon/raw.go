package crmmon

import (
	"encoding/xml"
	"fmt"
)

// The raw* types mirror the XML closely; all attributes are strings so that
// an absent attribute stays distinguishable from a false one until convert
// decides. Unknown elements and attributes are ignored, as pacemaker's
// schema policy (new attributes are optional within a major version) asks.

type rawDoc struct {
	APIVersion     string           `xml:"api-version,attr"`
	Version        string           `xml:"version,attr"`
	Summary        *rawSummary      `xml:"summary"`
	Nodes          *rawNodes        `xml:"nodes"`
	Resources      rawList          `xml:"resources"`
	NodeAttributes []rawNodeAttrs   `xml:"node_attributes>node"`
	NodeHistory    []rawNodeHistory `xml:"node_history>node"`
	Failures       []rawFailure     `xml:"failures>failure"`
	FenceHistory   *rawFenceHistory `xml:"fence_history"`
	Bans           []rawBan         `xml:"bans>ban"`
	Status         *rawStatus       `xml:"status"`
}

type rawSummary struct {
	Stack struct {
		Type string `xml:"type,attr"`
	} `xml:"stack"`
	DC struct {
		Present    string `xml:"present,attr"`
		Name       string `xml:"name,attr"`
		WithQuorum string `xml:"with_quorum,attr"`
	} `xml:"current_dc"`
	LastUpdate struct {
		Time string `xml:"time,attr"`
	} `xml:"last_update"`
	LastChange struct {
		Time string `xml:"time,attr"`
	} `xml:"last_change"`
	Options struct {
		StonithEnabled   string `xml:"stonith-enabled,attr"`
		FencingEnabled   string `xml:"fencing-enabled,attr"`
		MaintenanceMode  string `xml:"maintenance-mode,attr"`
		StopAllResources string `xml:"stop-all-resources,attr"`
		NoQuorumPolicy   string `xml:"no-quorum-policy,attr"`
	} `xml:"cluster_options"`
}

type rawNodes struct {
	Nodes []rawNode `xml:"node"`
}

type rawNode struct {
	Name          string `xml:"name,attr"`
	ID            string `xml:"id,attr"`
	Online        string `xml:"online,attr"`
	Standby       string `xml:"standby,attr"`
	StandbyOnFail string `xml:"standby_onfail,attr"`
	Maintenance   string `xml:"maintenance,attr"`
	Pending       string `xml:"pending,attr"`
	Unclean       string `xml:"unclean,attr"`
	Shutdown      string `xml:"shutdown,attr"`
	ExpectedUp    string `xml:"expected_up,attr"`
	IsDC          string `xml:"is_dc,attr"`
	Type          string `xml:"type,attr"`
	ContainerID   string `xml:"container_id,attr"`
	IDAsResource  string `xml:"id_as_resource,attr"`
}

type rawResource struct {
	ID             string `xml:"id,attr"`
	Agent          string `xml:"resource_agent,attr"`
	Role           string `xml:"role,attr"`
	TargetRole     string `xml:"target_role,attr"`
	Active         string `xml:"active,attr"`
	Orphaned       string `xml:"orphaned,attr"`
	Removed        string `xml:"removed,attr"`
	Blocked        string `xml:"blocked,attr"`
	Managed        string `xml:"managed,attr"`
	Failed         string `xml:"failed,attr"`
	FailureIgnored string `xml:"failure_ignored,attr"`
	Maintenance    string `xml:"maintenance,attr"`
	Pending        string `xml:"pending,attr"`
	Nodes          []struct {
		Name   string `xml:"name,attr"`
		Cached string `xml:"cached,attr"`
	} `xml:"node"`
}

// rawList is the <resources> content (and each container's): bundles,
// clones, groups and resources interleaved, in document order.
type rawList struct {
	items []rawItem
}

type rawItem struct {
	resource  *rawResource
	container *rawContainer
}

type rawContainer struct {
	kind     ParentKind
	attrs    []xml.Attr
	children rawList
}

func (c *rawContainer) attr(name string) string {
	for _, a := range c.attrs {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// maxNesting bounds container recursion. Pacemaker nests at most three
// deep (clone > group > primitive, bundle > replica > primitive); the bound
// only protects the agent from hostile input.
const maxNesting = 16

func (l *rawList) UnmarshalXML(d *xml.Decoder, start xml.StartElement) error {
	return l.decode(d, 0)
}

func (l *rawList) decode(d *xml.Decoder, depth int) error {
	if depth > maxNesting {
		return fmt.Errorf("resources nested deeper than %d levels", maxNesting)
	}
	for {
		tok, err := d.Token()
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch kind := ParentKind(t.Name.Local); kind {
			case "resource":
				r := &rawResource{}
				if err := d.DecodeElement(r, &t); err != nil {
					return err
				}
				l.items = append(l.items, rawItem{resource: r})
			case KindClone, KindGroup, KindBundle, KindReplica:
				c := &rawContainer{kind: kind, attrs: t.Attr}
				if err := c.children.decode(d, depth+1); err != nil {
					return err
				}
				l.items = append(l.items, rawItem{container: c})
			default:
				if err := d.Skip(); err != nil {
					return err
				}
			}
		case xml.EndElement:
			return nil
		}
	}
}

type rawNodeAttrs struct {
	Name       string `xml:"name,attr"`
	Attributes []struct {
		Name  string `xml:"name,attr"`
		Value string `xml:"value,attr"`
	} `xml:"attribute"`
}

type rawNodeHistory struct {
	Name      string `xml:"name,attr"`
	Resources []struct {
		ID          string         `xml:"id,attr"`
		FailCount   string         `xml:"fail-count,attr"`
		LastFailure string         `xml:"last-failure,attr"`
		Operations  []rawOperation `xml:"operation_history"`
	} `xml:"resource_history"`
}

type rawOperation struct {
	Call         string `xml:"call,attr"`
	Task         string `xml:"task,attr"`
	Interval     string `xml:"interval,attr"`
	RC           string `xml:"rc,attr"`
	RCText       string `xml:"rc_text,attr"`
	LastRCChange string `xml:"last-rc-change,attr"`
}

type rawFailure struct {
	OpKey        string `xml:"op_key,attr"`
	ID           string `xml:"id,attr"`
	Node         string `xml:"node,attr"`
	ExitStatus   string `xml:"exitstatus,attr"`
	ExitReason   string `xml:"exitreason,attr"`
	ExitCode     string `xml:"exitcode,attr"`
	Call         string `xml:"call,attr"`
	Status       string `xml:"status,attr"`
	LastRCChange string `xml:"last-rc-change,attr"`
	Interval     string `xml:"interval,attr"`
	Task         string `xml:"task,attr"`
}

type rawFenceHistory struct {
	Events []struct {
		Status     string `xml:"status,attr"`
		ExitReason string `xml:"exit-reason,attr"`
		Delegate   string `xml:"delegate,attr"`
		Action     string `xml:"action,attr"`
		Target     string `xml:"target,attr"`
		Client     string `xml:"client,attr"`
		Origin     string `xml:"origin,attr"`
		Completed  string `xml:"completed,attr"`
	} `xml:"fence_event"`
}

type rawBan struct {
	ID       string `xml:"id,attr"`
	Resource string `xml:"resource,attr"`
	Node     string `xml:"node,attr"`
	Weight   string `xml:"weight,attr"`
}

type rawStatus struct {
	Code    string   `xml:"code,attr"`
	Message string   `xml:"message,attr"`
	Errors  []string `xml:"errors>error"`
}
