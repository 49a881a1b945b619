#!/usr/bin/env bash
# Regenerates the pacemaker fixtures from the configurations in config/
# with the real pacemaker tools (Debian 12: pacemaker 2.1.5, crm_mon
# api-version 2.25). Deterministic: every wall-clock timestamp the tools
# write is pinned to a fixed time per step.
#
#   cib/<scenario>.xml      CIBs with a status section, made by crm_simulate
#                           (and crm_attribute / crm_resource for
#                           administrative states). The golden tests run
#                           the real crm_mon over these (CIB_file=...).
#   crm_mon/<scenario>.xml  what crm_mon --output-as=xml prints for each,
#                           validated against pacemaker's RelaxNG schema;
#                           input of the parser tests, fuzz seeds and
#                           benchmarks.
#   crm_mon/*-shape.xml, fenced-history.xml, legacy-as-xml.xml
#                           the same documents reshaped as other pacemaker
#                           versions print them (see derive_shapes).
#
# Usage: daemon/pacemaker/testdata/generate.sh   (then: go test ./daemon/pacemaker/... -update)
set -euo pipefail
cd "$(dirname "$0")"
export TZ=UTC LC_ALL=C

for tool in crm_simulate crm_mon crm_attribute crm_resource xmllint perl; do
	if ! command -v "$tool" >/dev/null; then
		echo "generate.sh: $tool not found; install it with: apt-get install -y pacemaker-cli-utils libxml2-utils" >&2
		exit 1
	fi
done

API_RNG=/usr/share/pacemaker/api
# T0 is 2020-01-01T10:00:00Z. crm_simulate stamps operations with the wall
# clock whatever -t says; every epoch later than T0 + 1 day is such a stamp
# and is pinned to the step's time.
export T0=1577872800
CIB=cib
MON=crm_mon
rm -rf "$CIB" "$MON"
mkdir -p "$CIB" "$MON"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

validate() { # schema file: fail loudly, stay quiet on success
	if ! xmllint --noout --relaxng "$API_RNG/$1" "$2" 2>"$tmp/xmllint.err"; then
		cat "$tmp/xmllint.err" >&2
		exit 1
	fi
}

pin_times() { # file step-epoch
	STEP=$2 perl -pi -e '
		s{\b(last-rc-change|last-run)="(\d+)"}{$1 . q(=") . ($2 > $ENV{T0} + 86400 ? $ENV{STEP} : $2) . q(")}ge;
		s{(name="last-failure-[^"]*" value=")(\d+)"}{$1 . ($2 > $ENV{T0} + 86400 ? $ENV{STEP} : $2) . q(")}ge;
	' "$1"
}

# simulate IN OUT STEP [crm_simulate options...]
simulate() {
	local in=$1 out=$2 step=$3
	shift 3
	crm_simulate -Q -t "$(date -u -d "@$step" +%Y-%m-%dT%H:%M:%SZ)" -x "$in" "$@" -O "$out" >/dev/null
	pin_times "$out" "$step"
}

# admin NAME FROM STEP COMMAND...: apply an administrative change to a copy
# of cib/FROM.xml with a CIB_file-aware tool, then let the cluster react.
admin() {
	local name=$1 from=$2 step=$3
	shift 3
	cp "$CIB/$from.xml" "$tmp/$name.xml"
	CIB_file="$tmp/$name.xml" "$@" >/dev/null 2>&1
	simulate "$tmp/$name.xml" "$CIB/$name.xml" "$step" -S
}

up() { # NAME CONFIG: both nodes up, everything started
	simulate "config/$2.xml" "$CIB/$1.xml" "$T0" -S -q true --node-up master-0 --node-up master-1
}

s() { echo $((T0 + 60 * $1)); } # the time of step N

# --- scenarios ---------------------------------------------------------------
up healthy tnf
simulate "$CIB/healthy.xml" "$CIB/offline-clean.xml" "$(s 1)" -S --node-down master-1
simulate "$CIB/healthy.xml" "$CIB/unclean.xml" "$(s 1)" -R --node-fail master-1
simulate "$CIB/healthy.xml" "$CIB/fenced.xml" "$(s 1)" -S --node-fail master-1
# A clean departure without two_node quorum: no-quorum-policy=stop stops
# everything on the survivor (stopped, not failed).
simulate "$CIB/healthy.xml" "$CIB/no-quorum.xml" "$(s 1)" -S -q false --node-down master-1
admin standby healthy "$(s 1)" crm_attribute -N master-1 -n standby -v on
admin node-maintenance healthy "$(s 1)" crm_attribute -N master-1 -n maintenance -v on
admin cluster-maintenance healthy "$(s 1)" crm_attribute -t crm_config -n maintenance-mode -v true
admin disabled-resource healthy "$(s 1)" crm_resource -r etcd-clone --meta -p target-role -v Stopped
admin banned healthy "$(s 1)" crm_resource --ban -r etcd-clone -N master-1
# The monitor failed and recovery is still pending: running, but failed.
simulate "$CIB/healthy.xml" "$CIB/failed-monitor.xml" "$(s 1)" -R --op-inject etcd_monitor_30000@master-1=1
# The real controller sets the fail-count of a failed start to INFINITY;
# crm_simulate sets 1, so set it and let the scheduler stop the instance.
simulate "$CIB/healthy.xml" "$tmp/failed-start.xml" "$(s 1)" -S \
	--op-inject etcd_monitor_30000@master-1=1 --op-fail etcd_start_0@master-1=1
CIB_file="$tmp/failed-start.xml" crm_attribute -N master-1 -n 'fail-count-etcd#start_0' -l reboot -v INFINITY
simulate "$tmp/failed-start.xml" "$CIB/failed-start.xml" "$(s 2)" -S
simulate "$CIB/healthy.xml" "$CIB/failed-fence-device.xml" "$(s 1)" -S \
	--op-inject master-1_redfish_monitor_60000@master-0=1 --op-fail master-1_redfish_start_0@master-0=1
# Pacemaker flags a node that corosync sees but whose controller has not
# joined yet as pending (and, as a side effect, standby).
perl -pe 's/(uname="master-1" in_ccm="true" crmd="online") join="member"/$1 join="pending"/' \
	"$CIB/healthy.xml" >"$CIB/pending.xml"

up two-fence-devices-ok two-fence-devices
# One of master-0's two devices fails its monitor: still fenceable, not
# fully healthy.
simulate "$CIB/two-fence-devices-ok.xml" "$CIB/two-fence-devices.xml" "$(s 1)" -R \
	--op-inject ipmi-rack1_monitor_60000@master-1=1
rm "$CIB/two-fence-devices-ok.xml"

up group group
up bundle-hosts bundle
simulate "$CIB/bundle-hosts.xml" "$CIB/bundle.xml" "$(s 1)" -S --node-up etcd-bundle-0 --node-up etcd-bundle-1
rm "$CIB/bundle-hosts.xml"
up no-address no-address

# A CIB written by a newer pacemaker (feature set 3.19.6, cluster options
# 2.1.5 does not know), with validate-with rewritten to the newest schema
# 2.1.5 accepts, as one must to read it with this crm_mon ...
perl -pe 's/crm_feature_set="3\.16\.1"/crm_feature_set="3.19.6"/;
	s{(<nvpair id="opt-stonith-enabled"[^>]*/>)}{$1\n        <nvpair id="opt-node-pending-timeout" name="node-pending-timeout" value="0"/>\n        <nvpair id="opt-fencing-enabled" name="fencing-enabled" value="true"/>}' \
	"$CIB/healthy.xml" >"$CIB/newer-pacemaker.xml"
# ... and left as written, which 2.1.5's crm_mon refuses (exit 0 with an
# <errors> element): the collector must report "unknown", not "no nodes".
perl -pe 's/validate-with="pacemaker-3\.9"/validate-with="pacemaker-3.10"/' \
	"$CIB/newer-pacemaker.xml" >"$CIB/newer-schema.xml"

# --- crm_mon outputs ---------------------------------------------------------
normalize() { # the one value that is always "now"
	perl -pi -e 's{<last_update time="[^"]*"}{<last_update time="Wed Jan  1 10:30:00 2020"}' "$1"
}
for cib in "$CIB"/*.xml; do
	name=$(basename "$cib" .xml)
	CIB_file="$cib" crm_mon --one-shot --inactive --output-as=xml >"$MON/$name.xml"
	normalize "$MON/$name.xml"
	validate api-result-2.25.rng "$MON/$name.xml"
done

# --- other versions' shapes (parser coverage) -------------------------------
derive_shapes() {
	# Fence history exists only with live daemons: add the shape crm_mon
	# 2.1.5 prints (fence-event-2.15.rng), an older failed attempt with a
	# non-UTC offset and a later success.
	perl -pe 's{  <bans>}{  <fence_history status="0">
    <fence_event action="reboot" target="master-1" client="pacemaker-controld.1843" origin="master-0" status="success" delegate="master-0" completed="2020-01-01 10:01:07Z"/>
    <fence_event action="reboot" target="master-1" client="stonith_admin.2201" origin="master-0" status="failed" exit-reason="Fence agent did not complete within 20s" delegate="master-0" completed="2020-01-01 10:59:40 +01:00"/>
  </fence_history>
  <bans>}' "$MON/fenced.xml" >"$MON/fenced-history.xml"
	validate api-result-2.25.rng "$MON/fenced-history.xml"

	# Pacemaker 3.0.2 (api 2.42): "removed" beside "orphaned", fencing-*
	# beside stonith-*, recased rc_text, resource maintenance, microsecond
	# fence completion times, a <pacemakerd> element.
	perl -pe 's/api-version="2\.25"/api-version="2.42"/;
		s/orphaned="(\w+)"/orphaned="$1" removed="$1"/g;
		s/ managed="(\w+)" failed=/ maintenance="false" managed="$1" failed=/g;
		s/stonith-enabled="(\w+)"/stonith-enabled="$1" fencing-enabled="$1"/;
		s/stonith-timeout-ms="(\d+)"/stonith-timeout-ms="$1" fencing-timeout-ms="$1"/;
		s/rc_text="ok"/rc_text="OK"/g;
		s{^(<pacemaker-result [^>]*>)$}{$1\n  <pacemakerd sys_from="pacemakerd" state="running" last_updated="2020-01-01 10:30:00Z"/>};
		s{  <bans>}{  <fence_history status="0">
    <fence_event action="reboot" target="master-1" client="pacemaker-controld.1843" origin="master-0" status="success" delegate="master-0" completed="2020-01-01 10:01:07.123456Z"/>
  </fence_history>
  <bans>}' "$MON/healthy.xml" >"$MON/v3.0-shape.xml"

	# Pacemaker 2.0.3 (api 2.0): none of the attributes added since.
	perl -pe 's/api-version="2\.25"/api-version="2.0"/;
		s/ (health|feature_set|mixed_version|stop-all-resources|stonith-timeout-ms|priority-fencing-delay-ms|promoted-only)="[^"]*"//g;
		s/ blocked="(true|false)"//g;
		s/(<clone [^>]*) disabled="\w+"/$1/g' \
		"$MON/healthy.xml" >"$MON/v2.0-shape.xml"
	validate api-result-2.0.rng "$MON/v2.0-shape.xml"

	# The deprecated `crm_mon --as-xml` root, still accepted by 3.0.x.
	CIB_file="$CIB/healthy.xml" crm_mon --one-shot --as-xml >"$MON/legacy-as-xml.xml"
	normalize "$MON/legacy-as-xml.xml"
}
derive_shapes
echo "regenerated $(ls "$CIB" | wc -l) CIBs and $(ls "$MON" | wc -l) crm_mon documents"
