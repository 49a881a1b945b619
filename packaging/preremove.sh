#!/bin/sh
# etcdlet package: before its files are removed (deb prerm, rpm %preun).
#
# Arguments:
#   deb  "remove" when the package goes; "upgrade <new version>" when another
#        version replaces it; "deconfigure", "failed-upgrade" otherwise.
#   rpm  $1 is how many etcdlet packages stay installed: 0 when the package
#        goes, 1 on an upgrade.
#
# Only when the package goes for good are etcdlet.service and every
# etcdlet@<name>.service stopped (the etcd members they run with the
# embedded runtime stop with them) and disabled, so no link to a unit that
# no longer exists stays behind. On an upgrade the agent
# keeps running until the new package restarts it. Nothing under
# /var/lib/etcdlet or the etcd data dir is ever deleted.
set -e

case "$1" in
remove | 0) ;;
*) exit 0 ;;
esac

if [ -d /run/systemd/system ]; then
	systemctl stop etcdlet.service 'etcdlet@*.service' || echo "etcdlet: systemctl stop etcdlet failed" >&2
fi
# Disabling only removes symbolic links; systemctl does it without a running
# systemd too (a chroot, an image). Disabling the template removes the
# links of every instance.
if command -v systemctl >/dev/null 2>&1; then
	systemctl --no-reload disable etcdlet.service etcdlet@.service >/dev/null 2>&1 || true
fi
exit 0
