#!/bin/sh
# etcdlet package: after its files are removed (deb postrm, rpm %postun).
#
# Arguments:
#   deb  "remove", "purge", "upgrade", "failed-upgrade", "abort-install",
#        "abort-upgrade", "disappear".
#   rpm  $1 is how many etcdlet packages stay installed: 0 when the package
#        goes, 1 on an upgrade.
#
# systemd forgets the removed unit and the kubelet drop-in (when it runs).
# On purge (deb) the configuration is gone (dpkg removes conffiles itself);
# the state dir /var/lib/etcdlet is removed only if it is empty. Its contents
# and the etcd data dir are never deleted: an operator who wants them gone
# removes them by hand.
set -e

if [ -d /run/systemd/system ]; then
	systemctl daemon-reload || echo "etcdlet: systemctl daemon-reload failed" >&2
fi
if [ "$1" = purge ]; then
	rmdir /var/lib/etcdlet 2>/dev/null || true
fi
exit 0
