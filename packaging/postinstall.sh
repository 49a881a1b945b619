#!/bin/sh
# etcdlet package: after its files are in place (deb postinst, rpm %post).
#
# Arguments:
#   deb  "configure" and the version configured before ("" on a first
#        install); "abort-upgrade", "abort-remove", "abort-deconfigure" when
#        dpkg rolls a failed step back.
#   rpm  $1 is how many etcdlet packages are installed once this one is:
#        1 on a first install, 2 on an upgrade.
#
# On a first install only systemd is told about the new unit files:
# etcdlet.service is neither enabled nor started, because the packaged
# configuration is not a cluster yet. On an upgrade every running etcdlet
# (etcdlet.service and each etcdlet@<name>.service) is restarted so that
# the new binary runs; a stopped one stays stopped.
#
# systemd is asked only when it runs (/run/systemd/system exists), so an
# install into a chroot, a container image or a build root only places the
# files.
set -e

upgrade=no
case "$1" in
configure) [ -z "$2" ] || upgrade=yes ;;
[0-9]*) [ "$1" -lt 2 ] || upgrade=yes ;;
esac

# An etcdlet.service enabled by a package older than etcdlet.target is
# linked from multi-user.target only: enabling it again (its [Install] as
# now shipped) puts it in etcdlet.target too, which the kubelet waits for.
# Links only, no running systemd needed.
if [ "$upgrade" = yes ] && command -v systemctl >/dev/null 2>&1 &&
	systemctl --quiet is-enabled etcdlet.service 2>/dev/null &&
	[ ! -e /etc/systemd/system/etcdlet.target.requires/etcdlet.service ]; then
	systemctl --no-reload reenable etcdlet.service >/dev/null 2>&1 ||
		echo "etcdlet: adding etcdlet.service to etcdlet.target failed: run systemctl reenable etcdlet.service" >&2
fi

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || echo "etcdlet: systemctl daemon-reload failed" >&2
	if [ "$upgrade" = yes ]; then
		# try-restart: only those that run. A failure is reported, not
		# fatal: the package is installed either way, and the journal
		# says why.
		systemctl try-restart etcdlet.service 'etcdlet@*.service' ||
			echo "etcdlet: restarting etcdlet on the new version failed: see systemctl status 'etcdlet*' and journalctl -u 'etcdlet*'" >&2
	fi
fi
exit 0
